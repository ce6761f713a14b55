#pragma once
// Internal to the reporters: number formatting and grouping shared by every format.
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "validate/compare/comparison.hpp"

namespace validate::report::detail {

// XML 1.0 text/attribute escaping (also right for HTML and inline SVG); control characters XML
// cannot carry become '?', so a stray byte in a message cannot make the JUnit file unparsable.
inline std::string xml_escape(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default: o += c < 0x20 && c != '\n' && c != '\t' && c != '\r' ? '?' : static_cast<char>(c);
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
