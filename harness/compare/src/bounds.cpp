// Per-element error bounds (bounds.hpp; the derivation is in docs/compare.md, "Error bounds").
#include "validate/compare/bounds.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "validate/compare/ulp.hpp"

namespace validate::compare {

namespace {

constexpr double kU = 0x1p-24;  // float32 unit roundoff: the accumulator every stack may use

double unit_roundoff(DType d) {
  switch (d) {
    case DType::bfloat16: return 0x1p-8;
    case DType::float16: return 0x1p-11;
    case DType::float64: return 0x1p-53;
    case DType::float32: break;
  }
  return kU;
}

// Element i of a float64, float32 or float16 array, as double (a float64 oracle keeps its digits).
double element(const ArrayView& v, std::int64_t i) {
  const std::byte* p = v.data + i * static_cast<std::int64_t>(dtype_size(v.storage));
  switch (v.storage) {
    case DType::float64: {
      double d;
      std::memcpy(&d, p, sizeof d);
      return d;
    }
    case DType::float16: {
      std::uint16_t h;
      std::memcpy(&h, p, sizeof h);
      return float16_bits_to_float(h);
    }
    default: {
      float f;
      std::memcpy(&f, p, sizeof f);
      return f;
    }
  }
}

}  // namespace

double dtype_ulp(double v, DType d) {
  int p = 24, emin = -126;  // precision in bits, smallest normal exponent
  if (d == DType::bfloat16) p = 8;
  else if (d == DType::float16) p = 11, emin = -14;
  else if (d == DType::float64) p = 53, emin = -1022;
  const double a = std::fabs(v);
  int e = emin;
  if (a > 0 && std::isfinite(a)) e = std::max(std::ilogb(a), emin);
  return std::ldexp(1.0, e - p + 1);
}

double side_bound(double y, double rho, const BoundOptions& o) {
  const double ud = unit_roundoff(o.dtype);
  const double up = o.gradient ? ud : kU;
  // The underflow term: each of the n partial results may lose half a subnormal spacing of float32.
  const double tiny = o.n * std::ldexp(1.0, -150);
  return o.lambda * (kU * std::sqrt(o.n) * (std::fabs(y) + rho) + up * rho) + 0.5 * dtype_ulp(y, o.dtype) + tiny;
}

double worst_case_bound(double y, double rho, const BoundOptions& o) {
  const double ud = unit_roundoff(o.dtype);
  const double up = o.gradient ? ud : kU;
  const double nu = o.n * kU;
  const double gamma = nu < 1 ? nu / (1 - nu) : std::numeric_limits<double>::infinity();
  const double s = std::sqrt(o.n) * rho;  // sum |a_i b_i| <= sqrt(n) rho (Cauchy-Schwarz)
  return gamma * (std::fabs(y) + s) + up * s + 0.5 * dtype_ulp(y, o.dtype);
}

Result<BoundResult> check_bounds(const ArrayView& ref, const ArrayView& run, const ArrayView& scale,
                                 const ArrayView* exact, const BoundOptions& o, std::size_t keep) {
  if (ref.numel != run.numel || scale.numel != ref.numel || (exact && exact->numel != ref.numel))
    return Error{"error-bound check: element counts differ"};
  BoundResult r;
  r.against_exact = exact != nullptr;
  auto worse = [](const BoundElement& a, const BoundElement& b) { return a.over > b.over; };
  for (std::int64_t i = 0; i < ref.numel; ++i) {
    const double a = element(ref, i), b = element(run, i), rho = element(scale, i);
    if (!std::isfinite(a) || !std::isfinite(b)) continue;  // the non-finite gate's business
    ++r.checked;
    const double side = side_bound(a, std::isfinite(rho) ? rho : 0, o);
    double err, bound;
    std::optional<double> x;
    if (exact) {
      x = element(*exact, i);
      if (!std::isfinite(*x)) continue;
      // Judged against the exact value: the run's own error within one side's bound.
      // A run at least as close to exact as the reference never fails, whatever the bound.
      err = std::fabs(b - *x);
      bound = std::max(side, std::fabs(a - *x));
    } else {
      // Two correct stacks: each within its bound of the exact value, so within the sum of each
      // other (the stored roundings give one ULP between them: twice the half ULP of side()).
      err = std::fabs(b - a);
      bound = 2 * side;
    }
    const double over = bound > 0 ? err / bound : (err > 0 ? std::numeric_limits<double>::infinity() : 0);
    r.max_over = std::max(r.max_over, over);
    const double wc = exact ? worst_case_bound(a, rho, o) : 2 * worst_case_bound(a, rho, o);
    if (wc > 0) r.max_worst_case_over = std::max(r.max_worst_case_over, err / wc);
    if (err <= bound) continue;
    ++r.beyond;
    BoundElement el{i, a, b, bound, x, over, ulp_distance(static_cast<float>(a), static_cast<float>(b), o.dtype)};
    r.max_failing_ulp = std::max(r.max_failing_ulp, el.ulp);
    if (x && std::fabs(a - *x) < std::fabs(b - *x)) ++r.ref_nearer;
    if (r.worst.size() < keep) {
      r.worst.push_back(el);
      std::sort(r.worst.begin(), r.worst.end(), worse);
    } else if (over > r.worst.back().over) {
      r.worst.back() = el;
      std::sort(r.worst.begin(), r.worst.end(), worse);
    }
  }
  return r;
}

double legacy_rtol(const std::string& dtype, bool gradient) {
  if (dtype == "bfloat16") return 4e-2;
  if (dtype == "float16") return gradient ? 3e-2 : 1e-2;
  return 5e-4;
}

}  // namespace validate::compare
