// The rounding-bias estimate (validate/metrics/rounding_bias.hpp) on values built here: bfloat16
// stored by truncation and a uniform 0.3% bias are named; round-to-nearest, and a common float32
// factor a few units of roundoff off (an FFT's normalization), are not.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "validate/metrics/rounding_bias.hpp"

using namespace validate;
using namespace validate::compare;

namespace {

float bf16_truncate(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, 4);
  b &= 0xFFFF0000u;
  std::memcpy(&v, &b, 4);
  return v;
}

float bf16_nearest(float v) {  // ties to even, as numpy's and PyTorch's converters
  std::uint32_t b;
  std::memcpy(&b, &v, 4);
  b += 0x7FFFu + ((b >> 16) & 1u);
  b &= 0xFFFF0000u;
  std::memcpy(&v, &b, 4);
  return v;
}

// Exact values: normal, 20000 of them (about a conv output of the smoke set).
std::vector<double> exact_values(unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(0, 1);
  std::vector<double> v(20000);
  for (double& x : v) x = d(gen);
  return v;
}

ArrayView view(const std::vector<float>& v) {
  return ArrayView{reinterpret_cast<const std::byte*>(v.data()), DType::float32, static_cast<std::int64_t>(v.size())};
}

template <class F>
std::vector<float> stored(const std::vector<double>& x, F f) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = f(x[i]);
  return out;
}

}  // namespace

TEST(RoundingBias, TruncatedBfloat16IsNamedWithItsSize) {
  const auto x = exact_values(1);
  const auto ref = stored(x, [](double v) { return bf16_nearest(static_cast<float>(v)); });
  const auto run = stored(x, [](double v) { return bf16_truncate(static_cast<float>(v)); });
  const RoundingBias b = rounding_bias(view(ref), view(run), allowed_bias(0, 0x1p-8));
  EXPECT_TRUE(b.biased()) << b.z;
  // Truncation loses a uniform fraction of an ULP: on average half of 2^-8 to 2^-7 of |v|, a
  // relative bias near -(2^-9 + 2^-8) / 2 = -2.9e-3 (log-uniform mantissas: -2.8e-3).
  EXPECT_LT(b.relative, -2.0e-3);
  EXPECT_GT(b.relative, -3.5e-3);
  EXPECT_EQ(b.away_from_zero, 0);
}

TEST(RoundingBias, AUniformBiasOfAThirdOfAPercentInBfloat16IsNamed) {
  const auto x = exact_values(2);
  const auto ref = stored(x, [](double v) { return bf16_nearest(static_cast<float>(v)); });
  const auto run = stored(x, [](double v) { return bf16_nearest(static_cast<float>(v * 1.003)); });
  const RoundingBias b = rounding_bias(view(ref), view(run), allowed_bias(0, 0x1p-8));
  EXPECT_TRUE(b.biased()) << b.z;
  EXPECT_NEAR(b.relative, 3e-3, 1e-3);
}

TEST(RoundingBias, RoundToNearestOnBothSidesIsNotNamed) {
  // Two correct bfloat16 stacks: the same exact values, each perturbed by float32 accumulation
  // noise of its own, then rounded to nearest.
  const auto x = exact_values(3);
  std::mt19937 gen(4);
  std::normal_distribution<double> noise(0, 1e-6);
  const auto ref = stored(x, [&](double v) { return bf16_nearest(static_cast<float>(v + noise(gen))); });
  const auto run = stored(x, [&](double v) { return bf16_nearest(static_cast<float>(v + noise(gen))); });
  const RoundingBias b = rounding_bias(view(ref), view(run), allowed_bias(0, 0x1p-8));
  EXPECT_FALSE(b.biased()) << b.z << " " << b.relative;
}

TEST(RoundingBias, ACommonFloat32FactorOffByAFewUnitsIsNotNamed) {
  // A float32 stack whose normalization factor is 4 u off (what the panel's FFT convolution shows
  // on its gradients), against a float64-rounded reference.
  const auto x = exact_values(5);
  const double factor = 1 + 4 * 0x1p-24;
  const auto ref = stored(x, [](double v) { return static_cast<float>(v); });
  const auto run = stored(x, [&](double v) { return static_cast<float>(v * factor); });
  const RoundingBias b = rounding_bias(view(ref), view(run), allowed_bias(0, 0x1p-24));
  EXPECT_FALSE(b.biased()) << b.z << " " << b.relative;
  EXPECT_NEAR(b.relative, 4 * 0x1p-24, 2 * 0x1p-24);  // measured, just not beyond the allowance
  // The same factor is named when no bias is allowed at all: the statistic does see it.
  EXPECT_TRUE(rounding_bias(view(ref), view(run), 0).biased());
}
