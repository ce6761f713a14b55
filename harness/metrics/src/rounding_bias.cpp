// The rounding-bias estimate of a tensor (rounding_bias.hpp).
#include "validate/metrics/rounding_bias.hpp"

#include <cmath>
#include <cstring>

#include "validate/metrics/ulp.hpp"

namespace validate::compare {

namespace {

double value(const ArrayView& v, std::int64_t i) {
  const std::byte* p = v.data + i * static_cast<std::int64_t>(dtype_size(v.storage));
  if (v.storage == DType::float64) {
    double d;
    std::memcpy(&d, p, sizeof d);
    return d;
  }
  if (v.storage == DType::float16) {
    std::uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return float16_bits_to_float(h);
  }
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}

}  // namespace

RoundingBias rounding_bias(const ArrayView& ref, const ArrayView& run, double allowed) {
  RoundingBias b;
  if (ref.numel != run.numel) return b;
  // Two passes: beta first, then the spread of the signed errors around beta |ref|.
  double signed_sum = 0, magnitude = 0;
  for (std::int64_t i = 0; i < ref.numel; ++i) {
    const double r = value(ref, i), x = value(run, i);
    if (!std::isfinite(r) || !std::isfinite(x) || r == 0) continue;
    const double e = r > 0 ? x - r : r - x;
    signed_sum += e, magnitude += std::fabs(r);
    ++b.elements;
    if (e < 0) ++b.toward_zero;
    if (e > 0) ++b.away_from_zero;
  }
  if (b.elements < 2 || magnitude <= 0) return b;
  b.relative = signed_sum / magnitude;
  double spread = 0;
  for (std::int64_t i = 0; i < ref.numel; ++i) {
    const double r = value(ref, i), x = value(run, i);
    if (!std::isfinite(r) || !std::isfinite(x) || r == 0) continue;
    const double d = (r > 0 ? x - r : r - x) - b.relative * std::fabs(r);
    spread += d * d;
  }
  b.se = std::sqrt(spread) / magnitude;
  const double excess = std::fabs(b.relative) - allowed;
  if (excess > 0) b.z = b.se > 0 ? excess / b.se : INFINITY;
  return b;
}

}  // namespace validate::compare
