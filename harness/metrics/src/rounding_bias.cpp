// The rounding-bias estimate of a tensor (rounding_bias.hpp).
#include "validate/metrics/rounding_bias.hpp"

#include <algorithm>
#include <cmath>

namespace validate::compare {

namespace {

// The sums one pass gathers: sum e, sum |r|, sum e^2, sum e |r|, sum r^2 (e = sign(r) (x - r)), so
// that sum (e - beta |r|)^2 = see - 2 beta ser + beta^2 srr needs no second pass.
struct Sums {
  double se = 0, sr = 0, see = 0, ser = 0, srr = 0;
  std::int64_t n = 0, toward = 0, away = 0;
  void add(double r, double x) {
    if (!(r != 0) || !std::isfinite(r) || !std::isfinite(x)) return;
    const double e = r > 0 ? x - r : r - x, a = std::fabs(r);
    se += e, sr += a, see += e * e, ser += e * a, srr += a * a;
    ++n;
    toward += e < 0;
    away += e > 0;
  }
};

}  // namespace

RoundingBias rounding_bias(const ArrayView& ref, const ArrayView& run, double allowed) {
  RoundingBias b;
  if (ref.numel != run.numel) return b;
  Sums s;
  if (ref.storage == DType::float32 && run.storage == DType::float32) {
    // The common case, read in place.
    const auto* r = reinterpret_cast<const float*>(ref.data);
    const auto* x = reinterpret_cast<const float*>(run.data);
    for (std::int64_t i = 0; i < ref.numel; ++i) s.add(r[i], x[i]);
  } else {
    for (std::int64_t i = 0; i < ref.numel; ++i) s.add(array_element(ref, i), array_element(run, i));
  }
  b.elements = s.n, b.toward_zero = s.toward, b.away_from_zero = s.away;
  if (s.n < 2 || s.sr <= 0) return b;
  b.relative = s.se / s.sr;
  const double spread = std::max(0.0, s.see - 2 * b.relative * s.ser + b.relative * b.relative * s.srr);
  b.se = std::sqrt(spread) / s.sr;
  const double excess = std::fabs(b.relative) - allowed;
  if (excess > 0) b.z = b.se > 0 ? excess / b.se : INFINITY;
  return b;
}

double accumulation_bias(const ArrayView& ref, const ArrayView& scale, const BoundOptions& o) {
  if (ref.numel != scale.numel) return 0;
  const double per = 0x1p-24 * std::sqrt(o.n);
  double acc = 0, mass = 0;
  for (std::int64_t i = 0; i < ref.numel; ++i) {
    const double r = array_element(ref, i);
    if (!(r != 0) || !std::isfinite(r)) continue;
    double rho = array_element(scale, i) * o.scale_unit;
    if (!std::isfinite(rho)) rho = 0;
    acc += per * (std::fabs(r) + rho);
    mass += std::fabs(r);
  }
  return mass > 0 ? acc / mass : 0;
}

}  // namespace validate::compare
