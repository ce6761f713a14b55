#pragma once
// Internal to the reporters: number formatting and grouping shared by every format.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "validate/compare/comparison.hpp"
#include "validate/core/utf8.hpp"

namespace validate::report::detail {

// Text from outside (a program's stderr, paths, messages quoting them) made safe for every report
// format: each byte that is not well-formed UTF-8, each C0 control other than tab, LF and CR, and
// U+FFFE/U+FFFF (UTF-8, but not XML 1.0 characters) is written as \xNN per byte, as JSON files
// write bytes that are not UTF-8 (core/utf8.hpp). A JUnit file with one such byte did not parse,
// and a CI test tab then showed nothing.
inline std::string clean_text(const std::string& s) {
  static const char hex[] = "0123456789abcdef";
  std::string o;
  o.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const std::size_t n = utf8::sequence_length(s, i, &cp);
    const bool ok = n > 0 && (cp >= 0x20 || cp == '\t' || cp == '\n' || cp == '\r') && cp != 0xFFFE && cp != 0xFFFF;
    if (ok) {
      o.append(s, i, n);
      i += n;
      continue;
    }
    for (std::size_t k = 0; k < (n ? n : 1); ++k, ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      o += "\\x";
      o += hex[c >> 4];
      o += hex[c & 15];
    }
  }
  return o;
}

// XML 1.0 text/attribute escaping (also right for HTML and inline SVG), of clean_text.
inline std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : clean_text(s)) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default: o += c;
    }
  }
  return o;
}

inline std::string sci(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";
  return fmt::format("{:.3g}", v);
}

// Table cells of one entry: max ULP and max abs (losses: their float32 ULP and absolute
// difference).
inline std::string cell_ulp(const compare::Entry& e) {
  if (e.stats) return fmt::format("{}", e.stats->ulp.max);
  if (e.loss) return fmt::format("{}", e.loss->ulp);
  return "-";
}
inline std::string cell_abs(const compare::Entry& e) {
  if (e.stats) return sci(e.stats->max_abs);
  if (e.loss) return sci(e.loss->abs_diff);
  return "-";
}
inline std::string tensor_label(const compare::Entry& e) {
  return e.tensor.empty() ? "(op)" : e.tensor;
}

// Training trajectories: the loss-curve entries, each the verdict of one op's trajectory.
inline std::vector<const compare::Entry*> trajectories(const compare::Report& r) {
  std::vector<const compare::Entry*> out;
  for (const auto& e : r.entries)
    if (e.trajectory) out.push_back(&e);
  return out;
}

// The largest error / gate over the steps (0 when nothing was compared).
inline double worst_over_gate(const compare::TrajectoryStats& t) {
  double m = 0;
  for (std::size_t i = 0; i < t.rel_error.size() && i < t.gate.size(); ++i)
    if (std::isfinite(t.rel_error[i]) && t.gate[i] > 0) m = std::max(m, t.rel_error[i] / t.gate[i]);
  return m;
}

// One line: "FAILED at step 1 (mistake): ..." or "passed: 100 steps within r0 sqrt(1 + step), ...".
inline std::string trajectory_headline(const compare::Entry& e) {
  const auto& t = *e.trajectory;
  std::string s;
  if (t.first_bad_step >= 0) {
    s = fmt::format("FAILED at step {} ({}): {}", t.first_bad_step, t.kind, t.sentence);
  } else if (t.checkpoints_failed > 0 && (e.verdict == compare::Verdict::passed || e.verdict == compare::Verdict::mistrusted)) {
    return fmt::format("FAILED at checkpoint step {}: the loss curve stays within its gate at all {} steps (worst {:.0f}% of "
                       "it), but {} of {} checkpoints failed",
                       t.first_bad_checkpoint_step, t.steps, 100 * worst_over_gate(t), t.checkpoints_failed,
                       t.checkpoints_compared);
  } else if (e.verdict == compare::Verdict::passed || e.verdict == compare::Verdict::mistrusted)
    s = fmt::format("passed: {} steps within the gate {} * sqrt(1 + step) (worst {:.0f}% of it)", t.steps, sci(t.r0),
                    100 * worst_over_gate(t));
  else
    s = std::string(compare::verdict_name(e.verdict)) + ": " + (t.sentence.empty() ? e.message : t.sentence);
  if (t.checkpoints_compared > 0)
    s += fmt::format("; checkpoints: {} of {} failed", t.checkpoints_failed, t.checkpoints_compared);
  return s;
}

// The first failing checkpoint and what its diagnosis named ("" when every checkpoint passed).
inline std::string trajectory_checkpoint_line(const compare::TrajectoryStats& t) {
  if (t.first_bad_checkpoint.empty()) return "";
  std::string s = fmt::format("first bad checkpoint {} (step {})", t.first_bad_checkpoint, t.first_bad_checkpoint_step);
  if (!t.checkpoint_diagnosis.empty())
    s += ": " + t.checkpoint_diagnosis + (t.checkpoint_diagnosis_code.empty() ? "" : " [" + t.checkpoint_diagnosis_code + "]");
  return s;
}

// Entries grouped by (variant, dtype), in report order.
inline std::vector<
    std::pair<std::pair<std::string, std::string>, std::vector<const compare::Entry*>>>
groups(const compare::Report& r) {
  std::vector<std::pair<std::pair<std::string, std::string>, std::vector<const compare::Entry*>>>
      out;
  for (const auto& e : r.entries) {
    auto key = std::make_pair(e.variant, e.dtype);
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& g) { return g.first == key; });
    if (it == out.end()) {
      out.push_back({key, {}});
      it = out.end() - 1;
    }
    it->second.push_back(&e);
  }
  return out;
}

inline std::string group_title(const std::pair<std::string, std::string>& k) {
  return k.second + (k.first.empty() ? "" : " [variant " + k.first + "]");
}

// A failure the diagnosis attributes to another entry's named mistake (Diagnosis::follows_from).
inline bool is_consequence(const compare::Entry& e) {
  return e.diagnosis && !e.diagnosis->follows_from.empty() && compare::is_failure(e.verdict);
}

// A named mistake, with the failing tensors of one op it was named on: "what went wrong".
struct RootCause {
  std::string where;                 // "[variant] dtype/case/op"
  std::vector<std::string> tensors;  // in report order
  const compare::Hypothesis* h = nullptr;
  std::string sentence;  // the first tensor's diagnosis
};

// The root causes of a report: failing entries whose diagnosis names a mistake of their own (not
// one that follows from another entry), one per op and mistake code.
inline std::vector<RootCause> root_causes(const compare::Report& r) {
  std::vector<RootCause> out;
  for (const auto& e : r.entries) {
    if (!compare::is_failure(e.verdict) || !e.diagnosis || is_consequence(e)) continue;
    const compare::Hypothesis* h = e.diagnosis->named();
    if (!h || h->params.contains("follows_from")) continue;
    const std::string where = (e.variant.empty() ? "" : "[" + e.variant + "] ") + e.dtype + "/" + e.case_name + "/" + e.op_name();
    auto it = std::find_if(out.begin(), out.end(), [&](const RootCause& c) { return c.where == where && c.h->code == h->code; });
    if (it == out.end()) {
      out.push_back(RootCause{where, {e.tensor}, h, e.diagnosis->summary});
    } else {
      it->tensors.push_back(e.tensor);
    }
  }
  return out;
}

inline std::size_t consequence_count(const compare::Report& r) {
  return static_cast<std::size_t>(std::count_if(r.entries.begin(), r.entries.end(), is_consequence));
}

// "float32/c/conv2d step1_grad_weight, step1_grad_bias: <the diagnosis>"
inline std::string root_cause_line(const RootCause& c) {
  std::string t;
  for (const auto& x : c.tensors) t += (t.empty() ? "" : ", ") + x;
  return c.where + " " + t + ": " + c.sentence;
}

inline bool shows_details(const compare::Entry& e) {
  return compare::is_failure(e.verdict) || e.verdict == compare::Verdict::invalid;
}

// "backend torch, device cpu, math tf32=off" from run_info.json.
inline std::string run_description(const compare::Report& r) {
  std::string s;
  auto add = [&](const char* key, const char* label) {
    if (r.run_info.contains(key) && r.run_info[key].is_string() &&
        !r.run_info[key].get<std::string>().empty())
      s += (s.empty() ? "" : ", ") + std::string(label) + " " + r.run_info[key].get<std::string>();
  };
  add("backend", "backend");
  add("device", "device");
  add("math", "math");
  return s;
}

}  // namespace validate::report::detail
