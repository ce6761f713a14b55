// check_tensor_gates: a compared tensor's gate checks, and for each failed one the sentence
// compare reports (shared with the GoogleTest matchers).
#include "validate/compare/comparison.hpp"

#include <string>
#include <utility>

#include <fmt/format.h>

#include "comparer.hpp"

namespace validate::compare {

using detail::value_at;

namespace {

std::string fmt_3g(double v) { return fmt::format("{:.3g}", v); }

}  // namespace

bool GateResult::passed() const {
  return std::all_of(checks.begin(), checks.end(), [](const Check& c) { return c.passed; });
}

namespace {

// Two values with just enough significant digits (3 to 9) to tell them apart: a failure of a few
// float32 ULPs must not read "ref 1.12, run 1.12".
std::pair<std::string, std::string> distinct(double a, double b) {
  for (int digits = 3;; ++digits) {
    std::string x = fmt::format("{:.{}g}", a, digits), y = fmt::format("{:.{}g}", b, digits);
    if (x != y || digits == 9 || !(a != b)) return {x, y};
  }
}

}  // namespace

GateResult check_tensor_gates(const TensorStats& s, const Gates& gates, const Shape& shape,
                              const std::string& axes, const ArrayView& ref, const ArrayView& run) {
  GateResult out;
  auto check = [&](const std::string& name, double value, double limit, bool upper) {
    const bool ok = upper ? value <= limit : value >= limit;
    out.checks.push_back(Check{name, value, limit, upper, ok});
    return ok;
  };
  if (!check("nonfinite_mismatch", static_cast<double>(s.nonfinite.mismatches()), 0, true)) {
    const std::int64_t i = s.nonfinite.first_mismatch;
    const auto [r, u] = distinct(value_at(ref, i), value_at(run, i));
    out.reasons.push_back(fmt::format(
        "{} NaN/Inf position mismatch{} (first at {}: ref {}, run {})", s.nonfinite.mismatches(),
        s.nonfinite.mismatches() == 1 ? "" : "es", format_coords(i, shape, axes), r, u));
  }
  if (gates.atol || gates.rtol || gates.max_ulp) {
    const std::int64_t finite_beyond = s.beyond_tolerance - s.nonfinite.mismatches();
    if (!check("beyond_tolerance", static_cast<double>(s.beyond_tolerance), 0, true) &&
        finite_beyond > 0) {
      std::string tol;
      if (gates.atol) tol += "atol " + fmt_3g(*gates.atol);
      if (gates.rtol) tol += std::string(tol.empty() ? "" : " or ") + "rtol " + fmt_3g(*gates.rtol);
      if (gates.max_ulp)
        tol += std::string(tol.empty() ? "" : ", ") + "max_ulp " + fmt_3g(*gates.max_ulp);
      const auto [r, u] = distinct(s.worst_abs.ref, s.worst_abs.run);
      out.reasons.push_back(fmt::format(
          "{} of {} elements beyond tolerance ({}); worst at {}: ref {}, run {} (abs err {}, {} "
          "ULP); "
          "would pass with atol >= {} or rtol >= {}",
          finite_beyond, s.numel, tol, format_coords(s.worst_abs.index, shape, axes), r, u,
          fmt_3g(s.worst_abs.abs_error), s.worst_abs.ulp, fmt_3g(s.min_atol), fmt_3g(s.min_rtol)));
    }
  }
  if (gates.max_ulp && !check("max_ulp", static_cast<double>(s.ulp.max), *gates.max_ulp, true))
    out.reasons.push_back(fmt::format("max ULP {} > {} at {}", s.ulp.max, fmt_3g(*gates.max_ulp),
                                      format_coords(s.worst_ulp.index, shape, axes)));
  if (gates.min_pcc && s.numel > 1 && !check("min_pcc", s.pcc, *gates.min_pcc, false))
    out.reasons.push_back(fmt::format("pcc {:.6g} < {}", s.pcc, *gates.min_pcc));
  return out;
}

}  // namespace validate::compare
