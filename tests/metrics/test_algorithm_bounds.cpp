// The algorithm terms of the error bound (algorithm_bounds.hpp): Winograd's transforms against the
// direct correlation in float64, the Winograd term against the error of a float32 Winograd
// convolution written here, the FFT term against its formula worked by hand, and the run-only
// addition to check_bounds (bounds.hpp, BoundOptions::run_extra).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "validate/metrics/algorithm_bounds.hpp"
#include "validate/metrics/bounds.hpp"

using validate::DType;
using namespace validate::compare;

namespace {

std::vector<double> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<double> v(n);
  for (double& x : v) x = static_cast<double>(static_cast<float>(d(g)));  // float32 values
  return v;
}

// y = A^T ((G g) .* (B^T d)) for one 1-D tile, in T arithmetic.
template <class T>
std::vector<T> winograd_1d(const WinogradMatrices& wm, const std::vector<T>& d, const std::vector<T>& g) {
  std::vector<T> prod(static_cast<std::size_t>(wm.n)), y(static_cast<std::size_t>(wm.m), T(0));
  for (int i = 0; i < wm.n; ++i) {
    T gg = 0, dd = 0;
    for (int k = 0; k < wm.r; ++k) gg += static_cast<T>(wm.g[static_cast<std::size_t>(i * wm.r + k)]) * g[static_cast<std::size_t>(k)];
    for (int k = 0; k < wm.n; ++k) dd += static_cast<T>(wm.bt[static_cast<std::size_t>(i * wm.n + k)]) * d[static_cast<std::size_t>(k)];
    prod[static_cast<std::size_t>(i)] = gg * dd;
  }
  for (int i = 0; i < wm.m; ++i)
    for (int k = 0; k < wm.n; ++k) y[static_cast<std::size_t>(i)] += static_cast<T>(wm.at[static_cast<std::size_t>(i * wm.n + k)]) * prod[static_cast<std::size_t>(k)];
  return y;
}

ArrayView algo_view(const std::vector<float>& v) {
  return ArrayView{reinterpret_cast<const std::byte*>(v.data()), DType::float32, static_cast<std::int64_t>(v.size()), false};
}

}  // namespace

TEST(AlgorithmBounds, WinogradTransformsComputeTheCorrelation) {
  for (int m : {2, 4, 6}) {
    SCOPED_TRACE(m);
    const WinogradMatrices wm = winograd_matrices(m);
    ASSERT_EQ(wm.n, m + 2);
    const auto d = random_vector(static_cast<std::size_t>(wm.n), 1u + static_cast<unsigned>(m));
    const auto g = random_vector(3, 7u + static_cast<unsigned>(m));
    const auto y = winograd_1d<double>(wm, d, g);
    for (int i = 0; i < m; ++i) {
      const double direct = d[static_cast<std::size_t>(i)] * g[0] + d[static_cast<std::size_t>(i + 1)] * g[1] + d[static_cast<std::size_t>(i + 2)] * g[2];
      EXPECT_NEAR(y[static_cast<std::size_t>(i)], direct, 1e-12) << "output " << i;
    }
  }
  // F(2, 3) by hand (Lavin and Gray, up to the signs of rows): |G| rows 1, (1/2 1/2 1/2) twice, 1.
  const WinogradMatrices f2 = winograd_matrices(2);
  const double g_abs[] = {1, 0, 0, .5, .5, .5, .5, .5, .5, 0, 0, 1};
  for (int i = 0; i < 12; ++i) EXPECT_DOUBLE_EQ(std::fabs(f2.g[static_cast<std::size_t>(i)]), g_abs[i]) << i;
  // F(6, 3)'s output transform reaches 2^5 at the point 2 (row 5: p^5): what makes it the loosest.
  const WinogradMatrices f6 = winograd_matrices(6);
  double most = 0;
  for (double a : f6.at) most = std::max(most, std::fabs(a));
  EXPECT_DOUBLE_EQ(most, 32.0);
}

// A float32 F(m, 3) Winograd convolution (forward, N = 2, C = 3, H = 7, W = 9, O = 4, padding 1)
// errs from the float64 direct result by less than lambda = 8 times the term, and by more than
// 1/300 of it: the term neither misses the error nor is orders of magnitude above it.
TEST(AlgorithmBounds, WinogradTermCoversAFloat32WinogradConvolution) {
  ConvShape s;
  s.n = 2, s.c = 3, s.h = 7, s.w = 9, s.o = 4, s.ph = 1, s.pw = 1;
  const auto x = random_vector(static_cast<std::size_t>(s.n * s.c * s.h * s.w), 11);
  const auto w = random_vector(static_cast<std::size_t>(s.o * s.c * 9), 12);
  const std::int64_t ho = s.hout(), wo = s.wout();
  ASSERT_EQ(ho, 7);
  ASSERT_EQ(wo, 9);
  auto X = [&](std::int64_t b, std::int64_t c, std::int64_t y, std::int64_t xx) {
    return y < 0 || y >= s.h || xx < 0 || xx >= s.w ? 0.0 : x[static_cast<std::size_t>(((b * s.c + c) * s.h + y) * s.w + xx)];
  };
  for (int m : {2, 4, 6}) {
    SCOPED_TRACE(m);
    const WinogradMatrices wm = winograd_matrices(m);
    const auto term = winograd_term(m, ConvPass::forward, s, ConvOperands{&x, &w, nullptr});
    ASSERT_EQ(term.size(), static_cast<std::size_t>(s.n * s.o * ho * wo));
    double worst = 0;
    for (std::int64_t b = 0; b < s.n; ++b)
      for (std::int64_t o = 0; o < s.o; ++o)
        for (std::int64_t y0 = 0; y0 < ho; y0 += m)
          for (std::int64_t x0 = 0; x0 < wo; x0 += m) {
            // 2-D F(m, 3) in float32: per channel U = G g G^T, V = B^T d B, M += U .* V, y = A^T M A.
            const int n = wm.n;
            std::vector<float> M(static_cast<std::size_t>(n * n), 0.f);
            for (std::int64_t c = 0; c < s.c; ++c) {
              std::vector<float> U(static_cast<std::size_t>(n * n)), V(static_cast<std::size_t>(n * n));
              for (int i = 0; i < n; ++i)
                for (int j = 0; j < n; ++j) {
                  float u = 0, v = 0;
                  for (int a = 0; a < 3; ++a)
                    for (int bb = 0; bb < 3; ++bb)
                      u += static_cast<float>(wm.g[static_cast<std::size_t>(i * 3 + a)]) *
                           static_cast<float>(w[static_cast<std::size_t>(((o * s.c + c) * 3 + a) * 3 + bb)]) *
                           static_cast<float>(wm.g[static_cast<std::size_t>(j * 3 + bb)]);
                  for (int a = 0; a < n; ++a)
                    for (int bb = 0; bb < n; ++bb)
                      v += static_cast<float>(wm.bt[static_cast<std::size_t>(i * n + a)]) *
                           static_cast<float>(X(b, c, y0 + a - 1, x0 + bb - 1)) *
                           static_cast<float>(wm.bt[static_cast<std::size_t>(j * n + bb)]);
                  U[static_cast<std::size_t>(i * n + j)] = u, V[static_cast<std::size_t>(i * n + j)] = v;
                }
              for (int k = 0; k < n * n; ++k) M[static_cast<std::size_t>(k)] += U[static_cast<std::size_t>(k)] * V[static_cast<std::size_t>(k)];
            }
            for (int i = 0; i < m && y0 + i < ho; ++i)
              for (int j = 0; j < m && x0 + j < wo; ++j) {
                float yv = 0;
                for (int a = 0; a < n; ++a)
                  for (int bb = 0; bb < n; ++bb)
                    yv += static_cast<float>(wm.at[static_cast<std::size_t>(i * n + a)]) * M[static_cast<std::size_t>(a * n + bb)] *
                          static_cast<float>(wm.at[static_cast<std::size_t>(j * n + bb)]);
                double exact = 0;
                for (std::int64_t c = 0; c < s.c; ++c)
                  for (int a = 0; a < 3; ++a)
                    for (int bb = 0; bb < 3; ++bb)
                      exact += X(b, c, y0 + i + a - 1, x0 + j + bb - 1) * w[static_cast<std::size_t>(((o * s.c + c) * 3 + a) * 3 + bb)];
                const double t = term[static_cast<std::size_t>(((b * s.o + o) * ho + y0 + i) * wo + x0 + j)];
                ASSERT_GT(t, 0);
                worst = std::max(worst, std::fabs(yv - exact) / (8 * t));
              }
          }
    EXPECT_LT(worst, 1.0);
    EXPECT_GT(worst, 1.0 / 300);
  }
}

// The FFT term of a 1 x 1 filter on one 2 x 4 plane, worked by hand: Lt = 2 * 4 = 8 points (powers of
// two already), kappa = (1 + 4 sqrt 2) log2 8, Q2 = ||x||^2 ||w||^2, one channel:
// u / sqrt(8) sqrt((3 kappa^2 + 1 + 2) Q2), the same at every output.
TEST(AlgorithmBounds, FftTermByHand) {
  ConvShape s;
  s.n = 1, s.c = 1, s.h = 2, s.w = 4, s.o = 1, s.kh = 1, s.kw = 1;
  const std::vector<double> x{1, -2, 0.5, 3, 0, 1, -1, 2}, w{-0.75};
  const auto t = fft_term(0, ConvPass::forward, s, ConvOperands{&x, &w, nullptr});
  ASSERT_EQ(t.size(), 8u);
  const double kappa = (1 + 4 * std::sqrt(2.0)) * 3, q2 = (1 + 4 + 0.25 + 9 + 0 + 1 + 1 + 4) * 0.5625;
  const double want = std::ldexp(1.0, -24) / std::sqrt(8.0) * std::sqrt((3 * kappa * kappa + 3) * q2);
  for (double v : t) EXPECT_NEAR(v, want, want * 1e-12);
  // Winograd has no 1 x 1 model.
  EXPECT_TRUE(winograd_term(2, ConvPass::forward, s, ConvOperands{&x, &w, nullptr}).empty());
}

// run_extra widens the run's side only: two stacks differ by their two-stack bound + extra, a run
// against the oracle by side + extra.
TEST(AlgorithmBounds, RunExtraAddsToTheRunSideOnly) {
  BoundOptions o;
  o.n = 16;
  const double side = two_stack_bound(1.0, 0.5, o) / 2;  // half the two stacks' bound
  const std::vector<float> ref{1.0f}, scale{0.5f};
  const double extra = 3 * side;
  const std::vector<double> ex{extra};
  // An error of 4.5 sides: beyond 2 sides, within 2 + 3.
  const std::vector<float> run{static_cast<float>(1.0 + 4.5 * side)};
  const double err = static_cast<double>(run[0]) - 1.0;
  auto plain = check_bounds(algo_view(ref), algo_view(run), algo_view(scale), nullptr, o);
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ(plain->beyond, 1);
  o.run_extra = ex.data();
  auto wide = check_bounds(algo_view(ref), algo_view(run), algo_view(scale), nullptr, o);
  ASSERT_TRUE(wide.is_ok());
  EXPECT_EQ(wide->beyond, 0);
  EXPECT_NEAR(wide->max_over, err / (2 * side + extra), 1e-12);
}

// The forward's term carried into the gradients through dL/dy = 2 (y - t) / N, worked by hand on a
// 1 x 1 filter over a 2 x 2 plane (N = 4, so 2/N = 1/2): grad_input_j = 1/2 sqrt(t_j^2 w^2),
// grad_weight = 1/2 sqrt(sum t^2 x^2), grad_bias = 1/2 sqrt(sum t^2).
TEST(AlgorithmBounds, ForwardErrorCarriedIntoTheGradientsByHand) {
  ConvShape s;
  s.n = 1, s.c = 1, s.h = 2, s.w = 2, s.o = 1, s.kh = 1, s.kw = 1;
  const std::vector<double> x{1, -1, 2, 0}, w{0.5}, t{1, 2, 3, 4};
  const ConvOperands in{&x, &w, nullptr};
  const auto gi = carried_term(CarriedInto::grad_input, s, in, t);
  ASSERT_EQ(gi.size(), 4u);
  for (int j = 0; j < 4; ++j) EXPECT_DOUBLE_EQ(gi[static_cast<std::size_t>(j)], 0.25 * t[static_cast<std::size_t>(j)]);
  const auto gw = carried_term(CarriedInto::grad_weight, s, in, t);
  ASSERT_EQ(gw.size(), 1u);
  EXPECT_DOUBLE_EQ(gw[0], 0.5 * std::sqrt(1.0 + 4.0 + 36.0 + 0.0));
  const auto gb = carried_term(CarriedInto::grad_bias, s, in, t);
  ASSERT_EQ(gb.size(), 1u);
  EXPECT_DOUBLE_EQ(gb[0], 0.5 * std::sqrt(30.0));
}

// The transposed op's output error (it lives in the conv2d's input space: W = 3, t = 1, 2, 3, so
// N = 3 and 2/N = 2/3) carried into its gradients, by hand on a 1 x 2 kernel w = (0.5, 2) with
// input x_t = (1, -2) (the conv2d's output space): grad_input_x = 2/3 sqrt(sum_k t_{x+k}^2 w_k^2)
// = 2/3 sqrt(16.25), 2/3 sqrt(37); grad_weight_k = 2/3 sqrt(sum_x t_{x+k}^2 x_t,x^2) = 2/3 sqrt(17),
// 2/3 sqrt(40); grad_bias = 2/3 sqrt(14).
TEST(AlgorithmBounds, TransposedOutputErrorCarriedIntoTheGradientsByHand) {
  ConvShape s;
  s.n = 1, s.c = 1, s.h = 1, s.w = 3, s.o = 1, s.kh = 1, s.kw = 2;
  const std::vector<double> t{1, 2, 3}, w{0.5, 2}, xt{1, -2};
  const ConvOperands in{nullptr, &w, &xt};
  const auto gi = carried_term_transposed(CarriedInto::grad_input, s, in, t);
  ASSERT_EQ(gi.size(), 2u);
  EXPECT_DOUBLE_EQ(gi[0], 2.0 / 3 * std::sqrt(16.25));
  EXPECT_DOUBLE_EQ(gi[1], 2.0 / 3 * std::sqrt(37.0));
  const auto gw = carried_term_transposed(CarriedInto::grad_weight, s, in, t);
  ASSERT_EQ(gw.size(), 2u);
  EXPECT_DOUBLE_EQ(gw[0], 2.0 / 3 * std::sqrt(17.0));
  EXPECT_DOUBLE_EQ(gw[1], 2.0 / 3 * std::sqrt(40.0));
  const auto gb = carried_term_transposed(CarriedInto::grad_bias, s, in, t);
  ASSERT_EQ(gb.size(), 1u);
  EXPECT_DOUBLE_EQ(gb[0], 2.0 / 3 * std::sqrt(14.0));
}

// Backward filter by a float32 Winograd F(3x3, m x m) (N = 2, C = 3, H = 7, W = 9, O = 4, padding
// 1): per batch element and m x m tile of dL/dy, U = G dy G^T, V = B^T d B, M += U .* V over every
// (batch, tile), dW = A^T M A. Its error from the float64 direct sum is below lambda = 8 times the
// term and above 1/300 of it.
TEST(AlgorithmBounds, WinogradFilterTermCoversAFloat32WinogradFilterGradient) {
  ConvShape s;
  s.n = 2, s.c = 3, s.h = 7, s.w = 9, s.o = 4, s.ph = 1, s.pw = 1;
  const std::int64_t ho = s.hout(), wo = s.wout();
  const auto x = random_vector(static_cast<std::size_t>(s.n * s.c * s.h * s.w), 21);
  const auto w = random_vector(static_cast<std::size_t>(s.o * s.c * 9), 22);
  const auto dy = random_vector(static_cast<std::size_t>(s.n * s.o * ho * wo), 23);
  auto X = [&](std::int64_t b, std::int64_t c, std::int64_t y, std::int64_t xx) {
    return y < 0 || y >= s.h || xx < 0 || xx >= s.w ? 0.0 : x[static_cast<std::size_t>(((b * s.c + c) * s.h + y) * s.w + xx)];
  };
  auto D = [&](std::int64_t b, std::int64_t o, std::int64_t y, std::int64_t xx) {
    return y >= ho || xx >= wo ? 0.0 : dy[static_cast<std::size_t>(((b * s.o + o) * ho + y) * wo + xx)];
  };
  for (int m : {2, 4, 6}) {
    SCOPED_TRACE(m);
    const WinogradMatrices wm = winograd_matrices(3, m);
    const int n = wm.n;
    ASSERT_EQ(n, m + 2);
    const auto term = winograd_term(m, ConvPass::backward_filter, s, ConvOperands{&x, &w, &dy});
    ASSERT_EQ(term.size(), static_cast<std::size_t>(s.o * s.c * 9));
    double worst = 0;
    for (std::int64_t o = 0; o < s.o; ++o)
      for (std::int64_t c = 0; c < s.c; ++c) {
        std::vector<float> M(static_cast<std::size_t>(n * n), 0.f);
        for (std::int64_t b = 0; b < s.n; ++b)
          for (std::int64_t y0 = 0; y0 < ho; y0 += m)
            for (std::int64_t x0 = 0; x0 < wo; x0 += m)
              for (int i = 0; i < n; ++i)
                for (int j = 0; j < n; ++j) {
                  float u = 0, v = 0;
                  for (int a = 0; a < m; ++a)
                    for (int bb = 0; bb < m; ++bb)
                      u += static_cast<float>(wm.g[static_cast<std::size_t>(i * m + a)]) *
                           static_cast<float>(D(b, o, y0 + a, x0 + bb)) *
                           static_cast<float>(wm.g[static_cast<std::size_t>(j * m + bb)]);
                  for (int a = 0; a < n; ++a)
                    for (int bb = 0; bb < n; ++bb)
                      v += static_cast<float>(wm.bt[static_cast<std::size_t>(i * n + a)]) *
                           static_cast<float>(X(b, c, y0 + a - 1, x0 + bb - 1)) *
                           static_cast<float>(wm.bt[static_cast<std::size_t>(j * n + bb)]);
                  M[static_cast<std::size_t>(i * n + j)] += u * v;
                }
        for (int kh = 0; kh < 3; ++kh)
          for (int kw = 0; kw < 3; ++kw) {
            float gv = 0;
            for (int a = 0; a < n; ++a)
              for (int bb = 0; bb < n; ++bb)
                gv += static_cast<float>(wm.at[static_cast<std::size_t>(kh * n + a)]) * M[static_cast<std::size_t>(a * n + bb)] *
                      static_cast<float>(wm.at[static_cast<std::size_t>(kw * n + bb)]);
            double exact = 0;
            for (std::int64_t b = 0; b < s.n; ++b)
              for (std::int64_t y = 0; y < ho; ++y)
                for (std::int64_t xx = 0; xx < wo; ++xx) exact += D(b, o, y, xx) * X(b, c, y + kh - 1, xx + kw - 1);
            const double t = term[static_cast<std::size_t>((o * s.c + c) * 9 + kh * 3 + kw)];
            ASSERT_GT(t, 0);
            worst = std::max(worst, std::fabs(gv - exact) / (8 * t));
          }
      }
    EXPECT_LT(worst, 1.0);
    EXPECT_GT(worst, 1.0 / 300);
  }
}
