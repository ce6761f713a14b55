// The rounding-bias estimate (validate/metrics/rounding_bias.hpp) on values built here: bfloat16
// stored by truncation and a uniform 0.3% bias are named; round-to-nearest, and a common float32
// factor a few units of roundoff off (an FFT's normalization), are not.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../common/bfloat16_truncation.hpp"
#include "validate/metrics/rounding_bias.hpp"

using namespace validate;
using namespace validate::compare;

namespace {

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

ArrayView bias_view(const std::vector<float>& v) {
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
  const auto run = stored(x, [](double v) { return validate::testing::bfloat16_truncated(static_cast<float>(v)); });
  const RoundingBias b = rounding_bias(bias_view(ref), bias_view(run), allowed_bias(0, 0x1p-8));
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
  const RoundingBias b = rounding_bias(bias_view(ref), bias_view(run), allowed_bias(0, 0x1p-8));
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
  const RoundingBias b = rounding_bias(bias_view(ref), bias_view(run), allowed_bias(0, 0x1p-8));
  EXPECT_FALSE(b.biased()) << b.z << " " << b.relative;
}

TEST(RoundingBias, ACommonFloat32FactorOffByAFewUnitsIsNotNamed) {
  // A float32 stack whose normalization factor is 4 u off (what the panel's FFT convolution shows
  // on its gradients), against a float64-rounded reference.
  const auto x = exact_values(5);
  const double factor = 1 + 4 * 0x1p-24;
  const auto ref = stored(x, [](double v) { return static_cast<float>(v); });
  const auto run = stored(x, [&](double v) { return static_cast<float>(v * factor); });
  const RoundingBias b = rounding_bias(bias_view(ref), bias_view(run), allowed_bias(0, 0x1p-24));
  EXPECT_FALSE(b.biased()) << b.z << " " << b.relative;
  EXPECT_NEAR(b.relative, 4 * 0x1p-24, 2 * 0x1p-24);  // measured, just not beyond the allowance
  // The same factor is named when no bias is allowed at all: the statistic does see it.
  EXPECT_TRUE(rounding_bias(bias_view(ref), bias_view(run), 0).biased());
}

namespace {

// 336 outputs (batch 2 x 6 channels x 28 positions) of a sum of 4608 positive products whose
// operands are log-uniform over 4 decades each (products over 8): exact in float64, and summed in
// order in float32 as a correct naive loop does; rho = sqrt(sum p^2) per output, the set's scale.
struct PositiveSums {
  std::vector<double> exact;
  std::vector<float> in_order, rho;
};

PositiveSums positive_sums() {
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> decade(-4, 0);
  PositiveSums s;
  for (int b = 0; b < 2; ++b)
    for (int c = 0; c < 6; ++c)
      for (int p = 0; p < 28; ++p) {
        double e = 0, r2 = 0;
        float acc = 0;
        for (int k = 0; k < 4608; ++k) {
          const float a = static_cast<float>(std::pow(10.0, decade(gen)));
          const float w = static_cast<float>(std::pow(10.0, decade(gen)));
          const double prod = static_cast<double>(a) * w;
          e += prod, r2 += prod * prod;
          acc += a * w;
        }
        s.exact.push_back(e);
        s.in_order.push_back(acc);
        s.rho.push_back(static_cast<float>(std::sqrt(r2)));
      }
  return s;
}

}  // namespace

// A correct in-order float32 sum of same-sign terms spanning decades leans toward zero (terms under
// half a unit of the running sum are dropped): beyond the fixed allowance, within the accumulation
// bias u sqrt(n) sum (|y| + rho) / sum |y| its bound allows. A bfloat16 store by truncation of the
// same sums is still named with that allowance added.
TEST(RoundingBias, AnInOrderPositiveSumSpanningDecadesIsNotNamedATruncatedStoreIs) {
  const PositiveSums s = positive_sums();
  BoundOptions o;
  o.n = 4608;
  const auto ref = stored(s.exact, [](double v) { return static_cast<float>(v); });
  const RoundingBias fixed = rounding_bias(bias_view(ref), bias_view(s.in_order), allowed_bias(o));
  EXPECT_TRUE(fixed.biased()) << fixed.z;  // the fixed allowance alone names it
  EXPECT_LT(fixed.relative, 0);          // toward zero
  const double acc = accumulation_bias(bias_view(ref), bias_view(s.rho), o);
  // |y| >> rho here (4608 positive terms): about u sqrt(4608) = 4.0e-6.
  EXPECT_GT(acc, 0x1p-24 * std::sqrt(4608.0));
  EXPECT_LT(acc, 1.1 * 0x1p-24 * std::sqrt(4608.0));
  EXPECT_LT(std::fabs(fixed.relative), acc);
  EXPECT_FALSE(rounding_bias(bias_view(ref), bias_view(s.in_order), allowed_bias(o) + acc).biased());
  // bfloat16: the reference rounded to nearest, the run's in-order sums truncated.
  BoundOptions b = o;
  b.dtype = DType::bfloat16;
  const auto ref16 = stored(s.exact, [](double v) { return bf16_nearest(static_cast<float>(v)); });
  std::vector<float> run16(s.in_order.size());
  for (std::size_t i = 0; i < run16.size(); ++i) run16[i] = validate::testing::bfloat16_truncated(s.in_order[i]);
  const RoundingBias t = rounding_bias(bias_view(ref16), bias_view(run16), allowed_bias(b) + accumulation_bias(bias_view(ref16), bias_view(s.rho), b));
  EXPECT_TRUE(t.biased()) << t.z << " " << t.relative;
  EXPECT_LT(t.relative, -1e-3);
}

namespace {

// grad_A = dY B^T of a matmul with M = 300, K = 144, N = 16 (every axis a different size): the
// reference from dY rounded to bfloat16 (the case dtype) and stored rounded to nearest; the
// float64 oracle's from the exact dY, stored rounded to nearest too. The reference's error is
// correlated along a row of grad_A (one row of rounded dY moves every element of it), the more so
// as K exceeds N (an element's sign follows the dY row it sums).
struct GradA {
  std::vector<double> from_rounded_dy, from_exact_dy;
  Shape shape{300, 144};
};

GradA grad_a(unsigned seed) {
  const int M = 300, K = 144, N = 16;
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(0, 1);
  std::vector<double> dy(M * N), B(K * N);
  for (double& v : dy) v = d(gen) * 1e-3;
  for (double& v : B) v = static_cast<double>(bf16_nearest(static_cast<float>(d(gen))));
  GradA g;
  for (int m = 0; m < M; ++m)
    for (int k = 0; k < K; ++k) {
      double exact = 0, rounded = 0;
      for (int n = 0; n < N; ++n) {
        const double y = dy[m * N + n];
        exact += y * B[k * N + n];
        rounded += static_cast<double>(bf16_nearest(static_cast<float>(y))) * B[k * N + n];
      }
      g.from_exact_dy.push_back(exact);
      g.from_rounded_dy.push_back(rounded);
    }
  return g;
}

}  // namespace

// The blocks of each gradient: the axes whose index picks the dL/dy elements an element sums.
TEST(RoundingBiasBlocks, EachGradientGroupsByTheDyElementsItShares) {
  EXPECT_EQ(gradient_blocks("grad_A", "MK", 0, 1)->axes, std::vector<int>{0});
  EXPECT_EQ(gradient_blocks("grad_B", "KN", 0, 1)->axes, std::vector<int>{1});
  EXPECT_EQ(gradient_blocks("grad_weight", "IOHW", 3, 1)->axes, std::vector<int>{1});
  const auto gi = gradient_blocks("grad_input", "NCHW", 3, 2);
  EXPECT_EQ(gi->axes, (std::vector<int>{0, 2}));
  EXPECT_EQ(gi->lag, 4);  // rows 4 apart both read a dL/dy row through a 3-tap, dilation-2 kernel
  EXPECT_EQ(gradient_blocks("grad_input", "NCHW", 0, 1)->axes, std::vector<int>{0});
  EXPECT_FALSE(gradient_blocks("output", "NCHW", 3, 1));
}

// The Student t threshold: a normal's 6 for many degrees of freedom; for 1 degree of freedom
// tan(pi/2 (1 - p)) = 1 / tan(pi p / 2), p = erfc(6 / sqrt 2).
TEST(RoundingBiasBlocks, TheThresholdIsTheStudentTQuantileOfTheNormalsTail) {
  const double p = std::erfc(6 / std::sqrt(2.0));
  EXPECT_NEAR(rounding_bias_threshold(1), 1 / std::tan(M_PI * p / 2), 1e-5 / std::tan(M_PI * p / 2));
  // 2 degrees of freedom: P(|T| > t) = 1 - t / sqrt(2 + t^2), so t = sqrt(2 / ((1 - p)^-2 - 1)).
  EXPECT_NEAR(rounding_bias_threshold(2), std::sqrt(2 / (1 / ((1 - p) * (1 - p)) - 1)), 1e-3);
  EXPECT_NEAR(rounding_bias_threshold(1e6), 6.0, 1e-3);
  EXPECT_GT(rounding_bias_threshold(30), rounding_bias_threshold(100));
}

// The oracle's grad_A (exact dY) against the reference's (dY rounded to bfloat16): no mistake on
// either side. The standard error of independent elements understates the row-correlated noise
// (the rows' is about twice it); the block standard error does not name it on any of 20 seeds.
// Truncating the oracle's values is named on every one.
TEST(RoundingBiasBlocks, ACorrelatedCorrectGradientIsNotNamedItsTruncationIs) {
  const BiasBlocks rows = *gradient_blocks("grad_A", "MK", 0, 1);
  const double allowed = allowed_bias(0, 0x1p-8);
  double worst_blocks = 0, se_ratio = 0;
  for (unsigned seed = 1; seed <= 20; ++seed) {
    const GradA g = grad_a(seed);
    const auto ref = stored(g.from_rounded_dy, [](double v) { return bf16_nearest(static_cast<float>(v)); });
    const auto run = stored(g.from_exact_dy, [](double v) { return bf16_nearest(static_cast<float>(v)); });
    const auto cut = stored(g.from_exact_dy, [](double v) { return validate::testing::bfloat16_truncated(static_cast<float>(v)); });
    const RoundingBias elements = rounding_bias(bias_view(ref), bias_view(run), 0);
    const RoundingBias blocks = rounding_bias(bias_view(ref), bias_view(run), g.shape, rows, 0);
    worst_blocks = std::max(worst_blocks, std::fabs(blocks.relative) / blocks.se);
    se_ratio += blocks.se / elements.se / 20;
    EXPECT_EQ(blocks.blocks, 300);
    EXPECT_EQ(blocks.dof, 299);
    EXPECT_FALSE(rounding_bias(bias_view(ref), bias_view(run), g.shape, rows, allowed).biased()) << seed;
    const RoundingBias t = rounding_bias(bias_view(ref), bias_view(cut), g.shape, rows, allowed);
    EXPECT_TRUE(t.biased()) << seed << " z " << t.z;
    EXPECT_LT(t.relative, -1e-3);
  }
  // The correlation is real: the rows' standard error is the larger.
  EXPECT_GT(se_ratio, 1.5);
  EXPECT_LT(worst_blocks, 6);
  if (std::getenv("VALIDATE_TEST_PRINT")) std::printf("se rows / se elements %.2f, worst |beta|/se %.2f\n", se_ratio, worst_blocks);
}

// Blocks along the last axis (grad_B's columns) and along the first (the same values transposed,
// grouped by row) are the same blocks: the same estimate to rounding.
TEST(RoundingBiasBlocks, ColumnBlocksEqualTheTransposesRowBlocks) {
  const int K = 37, N = 11;
  const std::vector<double> x = exact_values(9);
  std::vector<float> ref(K * N), run(K * N), ref_t(K * N), run_t(K * N);
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n) {
      const double v = x[static_cast<std::size_t>(k * N + n)];
      ref[k * N + n] = ref_t[n * K + k] = bf16_nearest(static_cast<float>(v));
      run[k * N + n] = run_t[n * K + k] = validate::testing::bfloat16_truncated(static_cast<float>(v * (1 + 0.01 * x[static_cast<std::size_t>(5000 + n)])));
    }
  const RoundingBias cols = rounding_bias(bias_view(ref), bias_view(run), Shape{K, N}, *gradient_blocks("grad_B", "KN", 0, 1), 0);
  const RoundingBias rows = rounding_bias(bias_view(ref_t), bias_view(run_t), Shape{N, K}, BiasBlocks{{0}, 0}, 0);
  EXPECT_EQ(cols.blocks, N);
  EXPECT_EQ(rows.blocks, N);
  EXPECT_NEAR(cols.relative, rows.relative, 1e-12);
  EXPECT_NEAR(cols.se, rows.se, 1e-9 * rows.se);
  EXPECT_GT(cols.se, 0);
  EXPECT_EQ(cols.elements, rows.elements);
}
