// The error-bound check's fast pass runs in the metric kernels' vectors (metrics_kernel.inc,
// bound_fast, one build per ISA); its max err / bound and err / worst case reach the report to the
// last digit, so each ISA must give the bits of the scalar definition written here (ctest runs this
// file again with VALIDATE_COMPARE_ISA=generic and avx2).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "validate/core/dtype.hpp"
#include "validate/metrics/bounds.hpp"

using namespace validate;
using namespace validate::compare;

namespace bound_fast_test {

// The fast pass's formulas for a direct-sum result with no bias, no operand rounding and a plain
// (not split) scale: the constants bounds.cpp's BoundConstants forms for such options.
struct Expected {
  double max_over = 0, max_wc = 0;
};
Expected bf_definition(const std::vector<float>& ref, const std::vector<float>& run, const std::vector<float>& scale,
                    const std::vector<float>* choice, const BoundOptions& o) {
  const double kU = 0x1p-24, kSqrt2 = 1.4142135623730951;
  const bool bf16 = o.dtype == DType::bfloat16;
  const double ud = bf16 ? 0x1p-8 : kU;
  const double eta = (bf16 ? 0x1p-134 : 0x1p-150) + o.n * 0x1p-150;
  const double up = o.gradient ? ud : kU, rn = std::sqrt(o.n), ra = rn;
  const double a = o.lambda * kU * rn, c = o.lambda * up + a;
  const double nu = o.n * kU, gamma = nu / (1 - nu), two = kSqrt2;
  const double z_unit = o.choice_unit * std::max(1.0, o.lambda / 8);
  // Half the dtype's spacing at |v| (significand bits; the smallest normal exponent, below which the
  // spacing is the subnormal one).
  const int bits = bf16 ? 8 : o.dtype == DType::float16 ? 11 : 24, emin = o.dtype == DType::float16 ? -14 : -126;
  auto half_ulp = [&](double v) {
    int e = emin + 1;  // zero: the subnormal spacing
    if (v != 0) std::frexp(v, &e);
    return std::ldexp(1.0, std::max(e - 1, emin) - bits);
  };
  Expected e;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double av = ref[i], bv = run[i], rho = scale[i] * o.scale_unit, ya = std::fabs(av);
    const double hu = ud * ya + eta;
    double bound = two * (a * ya + c * rho) + 2 * hu;
    if (choice) {
      const double z = (*choice)[i] * z_unit, reach = z + kSqrt2 * a * ya;
      const double hr = half_ulp(av), hx = std::min(half_ulp(bv), half_ulp(ya + hr + reach));
      const double tight = reach + ((hr + hx) + 2 * o.n * 0x1p-150);
      bound = z >= 0 && tight < bound ? tight : bound;
    }
    const double wc = 2 * (gamma * (ya + ra * rho) + up * rn * rho + hu);
    const double err = std::fabs(bv - av);
    const double over = err / bound, w = err / wc;
    e.max_over = over > e.max_over ? over : e.max_over;
    e.max_wc = w > e.max_wc ? w : e.max_wc;
  }
  return e;
}

// Stored as float16 and read back: the values check_bounds widens from the file.
std::vector<float> bf_through_half(std::vector<float> v, std::vector<std::uint16_t>& bits) {
  bits.resize(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) bits[i] = float_to_float16_bits(v[i]), v[i] = float16_bits_to_float(bits[i]);
  return v;
}

ArrayView bf_view(const std::vector<float>& v) {
  return ArrayView{reinterpret_cast<const std::byte*>(v.data()), DType::float32, static_cast<std::int64_t>(v.size())};
}
ArrayView bf_view(const std::vector<std::uint16_t>& v) {
  return ArrayView{reinterpret_cast<const std::byte*>(v.data()), DType::float16, static_cast<std::int64_t>(v.size())};
}

void bf_check(DType dtype, bool with_choice, std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0, 1);
  std::vector<float> ref(n), run(n), scale(n), choice(n);
  for (std::size_t i = 0; i < n; ++i) {
    ref[i] = d(gen);
    scale[i] = 0.5f + std::fabs(d(gen));
    run[i] = ref[i] * (1 + 2e-7f * d(gen));  // well within the bound: the fast pass answers
    choice[i] = std::fabs(d(gen)) * 1e-3f;
    // Zeros and float32 subnormals, where a stored rounding's half ULP is the subnormal one.
    if (i % 13 == 5) ref[i] = run[i] = 0.0f;
    if (i % 17 == 3) ref[i] = run[i] = std::ldexp(ref[i], -135);
  }
  std::vector<std::uint16_t> scale_bits, choice_bits;
  scale = bf_through_half(scale, scale_bits);
  choice = bf_through_half(choice, choice_bits);
  BoundOptions o;
  o.dtype = dtype;
  o.gradient = with_choice;
  o.n = 72;
  o.lambda = 8;
  o.scale_unit = 0x1p-4;
  o.choice_unit = 0x1p-6;
  const ArrayView cv = bf_view(choice_bits);
  if (with_choice) o.choice = &cv;
  for (int threads : {1, 2}) {
    auto r = check_bounds(bf_view(ref), bf_view(run), bf_view(scale_bits), nullptr, o, 5, threads);
    ASSERT_TRUE(r) << r.message();
    ASSERT_EQ(r->beyond, 0);
    EXPECT_EQ(r->checked, static_cast<std::int64_t>(n));
    const Expected e = bf_definition(ref, run, scale, with_choice ? &choice : nullptr, o);
    EXPECT_EQ(std::memcmp(&r->max_over, &e.max_over, sizeof(double)), 0) << r->max_over << " vs " << e.max_over;
    EXPECT_EQ(std::memcmp(&r->max_worst_case_over, &e.max_wc, sizeof(double)), 0)
        << r->max_worst_case_over << " vs " << e.max_wc;
  }
}

}  // namespace bound_fast_test

using namespace bound_fast_test;

TEST(BoundFast, Float32OutputMatchesTheScalarDefinitionBitForBit) {
  for (std::size_t n : {1u, 7u, 8u, 17u, 262144u, 262151u, 600001u}) bf_check(DType::float32, false, n, 11u + static_cast<unsigned>(n));
}

TEST(BoundFast, Bfloat16GradientWithChoiceMatchesTheScalarDefinitionBitForBit) {
  for (std::size_t n : {1u, 9u, 16u, 262144u, 300007u}) bf_check(DType::bfloat16, true, n, 5u + static_cast<unsigned>(n));
}

// A run that declares its own algorithm adds a term per element (BoundOptions::run_extra) to its
// side of the bound: the fast pass adds it as the scalar pass does (to the bound, and to the worst
// case as (side + extra) - side), on every ISA.
TEST(BoundFast, TheRunsAlgorithmTermMatchesTheScalarDefinitionBitForBit) {
  for (std::size_t n : {1u, 9u, 262144u, 300007u}) {
    std::mt19937 gen(3u + static_cast<unsigned>(n));
    std::normal_distribution<float> d(0, 1);
    std::vector<float> ref(n), run(n), scale(n);
    std::vector<double> extra(n);
    for (std::size_t i = 0; i < n; ++i) {
      ref[i] = d(gen);
      scale[i] = 0.5f + std::fabs(d(gen));
      extra[i] = std::fabs(static_cast<double>(d(gen))) * 1e-5;
      const double off = std::clamp(static_cast<double>(d(gen)), -1.5, 1.5) * 0.5 * extra[i];
      run[i] = ref[i] + static_cast<float>(off);  // often beyond the plain bound, within bound + extra
    }
    std::vector<std::uint16_t> scale_bits;
    scale = bf_through_half(scale, scale_bits);
    BoundOptions o;
    o.n = 72;
    o.lambda = 8;
    o.scale_unit = 0x1p-4;
    o.run_extra = extra.data();
    const double kU = 0x1p-24, kSqrt2 = 1.4142135623730951, rn = std::sqrt(o.n);
    const double eta = o.n * 0x1p-150 + 0x1p-150, a = o.lambda * kU * rn, c = o.lambda * kU + a;
    const double gamma = o.n * kU / (1 - o.n * kU);
    Expected e;
    for (std::size_t i = 0; i < n; ++i) {
      const double av = ref[i], bv = run[i], rho = scale[i] * o.scale_unit, ya = std::fabs(av);
      const double hu = kU * ya + eta, stat = a * ya + c * rho, side = stat + hu;
      const double bound = kSqrt2 * stat + 2 * hu + extra[i];
      const double wc = 2 * (gamma * (ya + rn * rho) + kU * rn * rho + hu) + ((side + extra[i]) - side);
      const double err = std::fabs(bv - av);
      e.max_over = std::max(e.max_over, err / bound);
      e.max_wc = std::max(e.max_wc, err / wc);
    }
    for (int threads : {1, 2}) {
      auto r = check_bounds(bf_view(ref), bf_view(run), bf_view(scale_bits), nullptr, o, 5, threads);
      ASSERT_TRUE(r) << r.message();
      ASSERT_EQ(r->beyond, 0);
      EXPECT_EQ(std::memcmp(&r->max_over, &e.max_over, sizeof(double)), 0) << r->max_over << " vs " << e.max_over;
      EXPECT_EQ(std::memcmp(&r->max_worst_case_over, &e.max_wc, sizeof(double)), 0)
          << r->max_worst_case_over << " vs " << e.max_wc;
    }
  }
}
