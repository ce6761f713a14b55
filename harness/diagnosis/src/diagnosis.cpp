// The diagnosis of one failing tensor: runs the families (diagnosis_internal.hpp), ranks what
// fits, and words it. The op-level reading of several entries together is diagnosis_op.cpp.
#include "validate/diagnosis/diagnosis.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "diagnosis_internal.hpp"

namespace validate::compare {

using namespace detail;

namespace {

std::string sentence(const Hypothesis& h, const std::string& subject) {
  std::string s;
  if (h.side == "output")
    s = fmt::format("{} equals reference {} — {}?", subject, h.description, h.cause);
  else
    s = fmt::format("{}: {} — {}?", subject, h.description, h.cause);
  if (!h.confirmed_all && h.checked > 1)
    s += fmt::format(" (checked on {} sampled elements)", h.checked);
  if (!h.fix.empty()) s += " Fix: " + h.fix + ".";
  if (h.params.contains("same_bytes_as")) {
    std::string also;
    for (const auto& a : h.params["same_bytes_as"])
      also += (also.empty() ? "" : ", ") + a["spec"].get<std::string>() + " (" +
              a["code"].get<std::string>() + ")";
    s += " On this shape (an axis of size 1) the same bytes are also " + also +
         ": the numbers cannot tell these apart.";
  }
  return s;
}

}  // namespace

std::string diagnosis_summary(const Diagnosis& dx, const std::string& tensor) {
  const std::string subject = tensor.empty() ? "the run" : "run " + tensor;
  if (!dx.matches.empty()) {
    const Hypothesis& h = dx.matches.front();
    std::string s;
    if (h.params.contains("follows_from"))
      s = fmt::format("{} follows from the mistake named on {}: {}", subject,
                      h.params["follows_from"].get<std::string>(), sentence(h, "run " + h.params["follows_from"].get<std::string>()));
    else
      s = sentence(h, subject);
    if (dx.ambiguous) {
      std::string also;
      std::set<std::string> said = {h.code + "/" + h.tensor + "/" + h.spec};
      int n = 0;
      for (std::size_t i = 1; i < dx.matches.size() && n < 3; ++i) {
        const Hypothesis& o = dx.matches[i];
        if (!said.insert(o.code + "/" + o.tensor + "/" + o.spec).second) continue;
        also += fmt::format("{}({}) {} ({} {})", n ? "; " : "", n + 1, o.description, o.code,
                            o.tensor);
        ++n;
      }
      s += " Equally consistent, so the numbers cannot tell them apart on this case: " + also + ".";
    }
    return s;
  }
  std::string coincident;
  if (!dx.coincident.empty()) {
    const std::size_t n = dx.coincident.size();
    coincident = fmt::format(" ({} the declared computation on this geometry, so no run can show {}: {}{})",
                             n == 1 ? std::string("one reading reproduces") : std::to_string(n) + " readings reproduce",
                             n == 1 ? "it" : "them", dx.coincident.front(), n > 1 ? ", ..." : "");
  }
  if (const std::string p = profile_sentence(dx.profile, subject); !p.empty()) return p + coincident;
  std::string fams;
  for (const auto& f : dx.families) fams += (fams.empty() ? "" : ", ") + f;
  // The hypothesis with the smallest residual is not offered as a lead: none explains the run, and
  // a layout that halves a residual is no evidence of a layout mistake (a missing zero_grad read
  // best as "I and H swapped"). JSON keeps it, as "closest", for tools.
  // Beyond the worst case of rounding in the declared sums, the failure is not rounding: say so, with
  // the number, so that "none of these" is not read as "close enough".
  std::string beyond;
  const auto& p = dx.profile;
  if (p.is_object() && p.contains("max_over_worst_case") && p.value("beyond", std::int64_t{0}) > 0 &&
      p["max_over_worst_case"].get<double>() > 1)
    beyond = fmt::format("; at up to {:.3g}x the worst case of rounding in the declared sums, it is a difference in "
                         "what is computed, not rounding",
                         p["max_over_worst_case"].get<double>());
  return fmt::format("no hypothesis explains {}: tried {} ({}); the mistake is none of these{}{}", subject, dx.tried,
                     fams, beyond, coincident);
}

Diagnosis diagnose(const DiagnosisInput& in) {
  Search s;
  if (in.role == ops::Role::loss) {
    search_loss(in, s);
    s.dx.baseline_max_abs = std::fabs(in.run_loss - in.ref_loss);
  } else {
    const std::int64_t numel = shape_numel(in.shape);
    if (numel <= 1 || in.ref.numel != numel || in.run.numel != numel) return s.dx;
    const ElementTest t = gate_test(in);
    {
      Eval base;
      for (std::int64_t p : sample_positions(numel, in.sample))
        base.add_at(p, read_value(in.ref, p), read_value(in.run, p), t);
      s.dx.baseline_max_abs = base.max_abs;
    }
    if (!in.rounding_sized) search_output_side(in, s);
    search_conv_inputs(in, s);
    search_matmul_inputs(in, s);
    if (!in.rounding_sized) search_conv_transpose_inputs(in, s), search_gradient_scale(in, s);
    search_gradient_accumulation(in, s);
    // The families judged by the gate's element test (the bytes re-read, the gradient scaled) name
    // a cause only when the run as declared fails that test: when it passes it too (the gate
    // failed on something else, e.g. its PCC), those numbers do not tell the hypothesis from the
    // declared reading.
    auto& m = s.dx.matches;
    const auto by_element_test = [](const Hypothesis& h) {
      return h.family == "output_layout" || h.family == "gradient_scale";
    };
    if (std::any_of(m.begin(), m.end(), by_element_test) && declared_agrees(in, t)) {
      for (auto h = m.begin(); h != m.end();) {
        if (!by_element_test(*h)) {
          ++h;
          continue;
        }
        h->passes = false;
        if (!s.dx.closest || h->max_abs < s.dx.closest->max_abs) s.dx.closest = *h;
        h = m.erase(h);
      }
    }
  }
  auto& m = s.dx.matches;
  if (m.empty() && in.role != ops::Role::loss && !in.rounding_sized) s.dx.profile = failure_profile(in);
  std::stable_sort(m.begin(), m.end(),
                   [](const Hypothesis& a, const Hypothesis& b) { return a.rank < b.rank; });
  std::set<std::string> kinds;
  for (const auto& h : m) kinds.insert(h.code + "/" + h.tensor + "/" + h.side + "/" + h.spec);
  s.dx.ambiguous = kinds.size() > 1;
  if (!m.empty() || s.dx.tried > 0) s.dx.summary = diagnosis_summary(s.dx, in.tensor);
  return s.dx;
}

}  // namespace validate::compare
