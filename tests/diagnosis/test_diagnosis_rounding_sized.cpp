// A failure that is rounding-sized (a tighter gate than the computation allows, another summation
// algorithm) is never blamed on a layout mistake: hypotheses that reproduce the declared sums on
// the geometry (data and filter flipped with the output written flipped, on a stride-1 conv with
// symmetric padding) are not candidates, and the profile over the tensor says what is known.
// The Winograd F(4x4,3x3) convolution here is written from its transform matrices (Lavin & Gray,
// points 0, +-1, +-2), in float32 like a library's, independently of the harness.
#include <gtest/gtest.h>

#include "../common/bfloat16_truncation.hpp"
#include "diagnosis_fixture.hpp"

namespace {

// The thresholds docs/compare.md states for the profile: a rounding bias at z >= 6, a tile pattern
// at a spread of 2x.
constexpr double kSignBiasZForTests = 6, kTileSpreadForTests = 2;

// 3x3, stride 1, padding 1: the geometry where flips of data and output coincide with the sums.
Conv same_conv(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t o) {
  return Conv{n, c, h, w, o, 3, 3, 1, 1, 1, 1, 1, 1, 1};
}

// rho = sqrt(sum (x w)^2) per output, in float64: the scale a reference set stores.
Tensor conv_scale(const Conv& g, const Tensor& x, const Tensor& w) {
  Tensor x2 = x.clone(), w2 = w.clone();
  for (std::int64_t i = 0; i < x2.numel(); ++i) x2.set(i, x.get(i) * x.get(i));
  for (std::int64_t i = 0; i < w2.numel(); ++i) w2.set(i, w.get(i) * w.get(i));
  Tensor s = g.run([&](auto n, auto c, auto h, auto ww) { return static_cast<double>(x2.get(((n * g.C + c) * g.H + h) * g.W + ww)); },
                   [&](auto o, auto c, auto u, auto v) { return static_cast<double>(w2.get(((o * g.C + c) * 3 + u) * 3 + v)); },
                   nullptr);
  for (std::int64_t i = 0; i < s.numel(); ++i) s.set(i, std::sqrt(s.get(i)));
  return s;
}

Tensor reference(const Conv& g, const Tensor& x, const Tensor& w) {
  return g.run([&](auto n, auto c, auto h, auto ww) { return static_cast<double>(x.get(((n * g.C + c) * g.H + h) * g.W + ww)); },
               [&](auto o, auto c, auto u, auto v) { return static_cast<double>(w.get(((o * g.C + c) * 3 + u) * 3 + v)); },
               nullptr);
}

// c[n x m] = a[n x k] times b[k x m] (or b[m x k] transposed), summed in float32 in order.
void mul(const float* a, const float* b, float* c, int n, int k, int m, bool b_transposed) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j) {
      float s = 0;
      for (int t = 0; t < k; ++t) s += a[i * k + t] * (b_transposed ? b[j * k + t] : b[t * m + j]);
      c[i * m + j] = s;
    }
}

// Winograd F(4x4,3x3) in float32: per 6x6 input tile d and channel, V = B^T d B and U = G g G^T,
// M = sum over channels of U .* V, the 4x4 output Y = A^T M A. Needs H and W multiples of 4.
Tensor winograd_f4(const Conv& g, const Tensor& x, const Tensor& w) {
  static const float BT[36] = {4, 0, -5, 0, 1, 0, 0, -4, -4, 1, 1, 0, 0, 4, -4, -1, 1, 0,
                               0, -2, -1, 2, 1, 0, 0, 2, -1, -2, 1, 0, 0, 4, 0, -5, 0, 1};
  static const float G[18] = {1.f / 4,  0,        0,       -1.f / 6, -1.f / 6, -1.f / 6, -1.f / 6, 1.f / 6, -1.f / 6,
                              1.f / 24, 1.f / 12, 1.f / 6, 1.f / 24, -1.f / 12, 1.f / 6, 0,        0,       1};
  static const float AT[24] = {1, 1, 1, 1, 1, 0, 0, 1, -1, 2, -2, 0, 0, 1, 1, 4, 4, 0, 0, 1, -1, 8, -8, 1};
  Tensor y(DType::float32, {g.N, g.O, g.H, g.W});
  auto xin = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t ww) {
    return h < 0 || h >= g.H || ww < 0 || ww >= g.W ? 0.f : x.get(((n * g.C + c) * g.H + h) * g.W + ww);
  };
  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t o = 0; o < g.O; ++o)
      for (std::int64_t th = 0; th < g.H; th += 4)
        for (std::int64_t tw = 0; tw < g.W; tw += 4) {
          float M[36] = {};
          for (std::int64_t c = 0; c < g.C; ++c) {
            float d[36], t[36], V[36], f[9], gt[18], U[36];
            for (int i = 0; i < 36; ++i) d[i] = xin(n, c, th - 1 + i / 6, tw - 1 + i % 6);
            for (int i = 0; i < 9; ++i) f[i] = w.get((o * g.C + c) * 9 + i);
            mul(BT, d, t, 6, 6, 6, false);
            mul(t, BT, V, 6, 6, 6, true);
            mul(G, f, gt, 6, 3, 3, false);
            mul(gt, G, U, 6, 3, 6, true);
            for (int i = 0; i < 36; ++i) M[i] += U[i] * V[i];
          }
          float t[24], Y[16];
          mul(AT, M, t, 4, 6, 6, false);
          mul(t, AT, Y, 4, 6, 4, true);
          for (int i = 0; i < 16; ++i) y.set(((n * g.O + o) * g.H + th + i / 4) * g.W + tw + i % 4, Y[i]);
        }
  return y;
}

// The input of a float32 output whose gate is the per-element bound (and `rtol`, when set).
DiagnosisInput bounded(const Conv& g, const Tensor& ref, const Tensor& run, const Tensor& x, const Tensor& w,
                       const Tensor& scale, std::optional<double> rtol) {
  DiagnosisInput in = conv_input(g, ref, run, x, w, nullptr);
  in.rtol = rtol;
  BoundOptions o;
  o.n = static_cast<double>(g.C * 9);
  in.bound = DiagnosisInput::ElementBound{view_of(scale), o};
  return in;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

// The float64 oracle's values against a float32 reference under rtol 1e-9: every element fails the
// gate by a few ULP, all within the computation's bound. Before, "data and filter flipped, output
// written flipped" was named: on this geometry it reproduces the declared sums.
TEST(DiagnosisRoundingSized, ATightGateOnCorrectValuesNamesNoMistake) {
  const Conv g = same_conv(2, 5, 12, 10, 7);
  const Tensor x = random_tensor({2, 5, 12, 10}, 7), w = random_tensor({7, 5, 3, 3}, 8);
  const Tensor ref = conv_narrow(g, x, w, nullptr, [](double v) { return static_cast<double>(static_cast<float>(v)); },
                                 false);
  const Tensor exact = reference(g, x, w), scale = conv_scale(g, x, w);
  std::int64_t differ = 0;
  for (std::int64_t i = 0; i < ref.numel(); ++i) differ += ref.get(i) != exact.get(i);
  ASSERT_GT(differ, ref.numel() / 10);  // the premise: the two are not bitwise equal
  const Diagnosis dx = diagnose(bounded(g, ref, exact, x, w, scale, 1e-9));
  EXPECT_TRUE(dx.matches.empty()) << dx.summary;
  EXPECT_FALSE(dx.coincident.empty()) << dx.summary;  // the flip pair was seen and set aside
  EXPECT_TRUE(contains(dx.summary, "no layout or precision mistake")) << dx.summary;
  EXPECT_TRUE(contains(dx.summary, "tighter than the computation allows")) << dx.summary;
  EXPECT_FALSE(contains(dx.summary, "flipped")) << dx.summary;
  EXPECT_EQ(dx.profile["within_bound"].get<std::int64_t>(), dx.profile["beyond"].get<std::int64_t>());
}

// A planted flip pair on the same geometry is still named: it does not reproduce the reference.
TEST(DiagnosisRoundingSized, ARealFlipOfTheDataIsStillNamedWhereThePairCoincides) {
  const Conv g = same_conv(2, 5, 12, 10, 7);
  const Tensor x = random_tensor({2, 5, 12, 10}, 17), w = random_tensor({7, 5, 3, 3}, 18);
  const Tensor ref = reference(g, x, w), scale = conv_scale(g, x, w);
  // The program flipped the data in H (not the filter) and wrote the output as declared.
  const Tensor run = reference(g, flipped(x, {false, false, true, false}), w);
  const Diagnosis dx = diagnose(bounded(g, ref, run, x, w, scale, std::nullopt));
  ASSERT_FALSE(dx.matches.empty()) << dx.summary;
  EXPECT_EQ(dx.matches.front().tensor, "input") << dx.summary;
  EXPECT_TRUE(contains(dx.matches.front().spec, "flip=H")) << dx.summary;
}

// Winograd F(4x4,3x3) in float32 against the float64 reference: nothing named, and the error's
// RMS per output position modulo 4 spreads well beyond what a direct float32 sum shows.
TEST(DiagnosisRoundingSized, AWinogradOutputShowsItsTilePatternAndNoMistake) {
  const Conv g = same_conv(2, 16, 24, 20, 3);
  const Tensor x = random_tensor({2, 16, 24, 20}, 27), w = random_tensor({3, 16, 3, 3}, 28);
  const Tensor exact = reference(g, x, w), scale = conv_scale(g, x, w);
  const Tensor wino = winograd_f4(g, x, w);
  double rel = 0;  // the premise: it is a convolution, to float32 rounding
  for (std::int64_t i = 0; i < exact.numel(); ++i)
    rel = std::max(rel, std::fabs(wino.get(i) - exact.get(i)) / (scale.get(i) + 1e-30));
  ASSERT_LT(rel, 1e-4);
  const Diagnosis dw = diagnose(bounded(g, exact, wino, x, w, scale, 1e-9));
  EXPECT_TRUE(dw.matches.empty()) << dw.summary;
  ASSERT_TRUE(dw.profile.contains("tile")) << dw.profile.dump();
  EXPECT_EQ(dw.profile["tile"]["m"].get<int>(), 4) << dw.profile.dump();
  EXPECT_GE(dw.profile["tile"]["spread"].get<double>(), kTileSpreadForTests) << dw.profile.dump();
  EXPECT_TRUE(contains(dw.summary, "Winograd F(4x4,3x3)")) << dw.summary;

  // A direct float32 sum (reversed order) shows no tile pattern and no Winograd name.
  const Tensor direct = conv_narrow(g, x, w, nullptr, [](double v) { return static_cast<double>(static_cast<float>(v)); },
                                    false, true);
  const Diagnosis dd = diagnose(bounded(g, exact, direct, x, w, scale, 1e-9));
  EXPECT_TRUE(dd.matches.empty()) << dd.summary;
  ASSERT_TRUE(dd.profile.contains("tile")) << dd.profile.dump();
  EXPECT_LT(dd.profile["tile"]["spread"].get<double>(), 1.5) << dd.profile.dump();
  EXPECT_FALSE(contains(dd.summary, "Winograd F(")) << dd.summary;
  if (std::getenv("VALIDATE_TEST_PRINT"))
    std::printf("%s\n%s\n%s\n%s\n", dw.profile.dump().c_str(), dw.summary.c_str(), dd.profile.dump().c_str(),
                dd.summary.c_str());
}

// A float32 running sum, in each order the narrow-accumulator search tries, against the float64
// values under a gate of 1e-9: a correct computation (the bound's own model), so nothing is named
// and no "accumulate in double" advice is given; the verdict says the gate is too tight.
TEST(DiagnosisRoundingSized, AFloat32RunningSumUnderATightGateIsNotAMistake) {
  const Conv g = same_conv(3, 16, 11, 9, 5);
  const Tensor x = random_tensor({3, 16, 11, 9}, 37), w = random_tensor({5, 16, 3, 3}, 38);
  const Tensor exact = reference(g, x, w), scale = conv_scale(g, x, w);
  const auto to_float = [](double v) { return static_cast<double>(static_cast<float>(v)); };
  for (const bool channels_inner : {false, true}) {
    const Tensor run = conv_narrow(g, x, w, nullptr, to_float, channels_inner);
    std::int64_t differ = 0;
    for (std::int64_t i = 0; i < run.numel(); ++i) differ += run.get(i) != exact.get(i);
    ASSERT_GT(differ, run.numel() / 4);  // the premise: float32 rounding shows on most elements
    const Diagnosis dx = diagnose(bounded(g, exact, run, x, w, scale, 1e-9));
    EXPECT_TRUE(dx.matches.empty()) << dx.summary;
    EXPECT_FALSE(contains(dx.summary, "float32 after every add")) << dx.summary;
    EXPECT_FALSE(contains(dx.summary, "accumulate in double")) << dx.summary;
    EXPECT_TRUE(contains(dx.summary, "no layout or precision mistake")) << dx.summary;
  }
}

// Values stored by truncation (round toward zero) lean toward zero on (nearly) every element that
// differs: the profile's sign statistic names it.
TEST(DiagnosisRoundingSized, TruncationShowsAsASignBias) {
  const Conv g = same_conv(2, 5, 12, 10, 7);
  const Tensor x = random_tensor({2, 5, 12, 10}, 37), w = random_tensor({7, 5, 3, 3}, 38);
  const Tensor exact = reference(g, x, w), scale = conv_scale(g, x, w);
  Tensor ref = exact.clone(), run = exact.clone();
  for (std::int64_t i = 0; i < exact.numel(); ++i) {
    ref.set(i, round_to_dtype(exact.get(i), DType::bfloat16));
    run.set(i, validate::testing::bfloat16_truncated(static_cast<float>(exact.get(i))));
  }
  DiagnosisInput in = bounded(g, ref, run, x, w, scale, 1e-9);
  in.logical = DType::bfloat16;
  in.bound->options.dtype = DType::bfloat16;
  const Diagnosis dx = diagnose(in);
  EXPECT_TRUE(dx.matches.empty()) << dx.summary;
  EXPECT_GE(dx.profile["bias"]["z"].get<double>(), kSignBiasZForTests) << dx.profile.dump();
  EXPECT_LT(dx.profile["bias"]["relative"].get<double>(), 0) << dx.profile.dump();
  EXPECT_TRUE(contains(dx.summary, "lean toward zero")) << dx.summary;
  if (std::getenv("VALIDATE_TEST_PRINT")) std::printf("%s\n", dx.summary.c_str());
}

namespace {

// grad_input of a 3x3, stride-1, padding-1 conv (batch 3, 5 channels, 23 x 9, 7 output channels:
// every axis a different size) from dL/dy in float64: exact, and from dL/dy rounded to bfloat16 as
// a reference computes it; rho = sqrt(sum (dy w)^2) per element, the set's scale.
struct GradInput {
  Tensor from_exact, from_rounded, rho;
};

GradInput grad_input_of(const Conv& g, const Tensor& dy, const Tensor& w) {
  GradInput gi{Tensor(DType::float32, {g.N, g.C, g.H, g.W}), Tensor(DType::float32, {g.N, g.C, g.H, g.W}),
               Tensor(DType::float32, {g.N, g.C, g.H, g.W})};
  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t c = 0; c < g.C; ++c)
      for (std::int64_t h = 0; h < g.H; ++h)
        for (std::int64_t x = 0; x < g.W; ++x) {
          double e = 0, r = 0, s2 = 0;
          for (std::int64_t o = 0; o < g.O; ++o)
            for (std::int64_t u = 0; u < 3; ++u)
              for (std::int64_t v = 0; v < 3; ++v) {
                const std::int64_t oh = h + 1 - u, ow = x + 1 - v;
                if (oh < 0 || oh >= g.H || ow < 0 || ow >= g.W) continue;
                const double d = dy.get(((n * g.O + o) * g.H + oh) * g.W + ow), wt = w.get(((o * g.C + c) * 3 + u) * 3 + v);
                e += d * wt, r += round_to_dtype(d, DType::bfloat16) * wt, s2 += d * wt * d * wt;
              }
          const std::int64_t i = ((n * g.C + c) * g.H + h) * g.W + x;
          gi.from_exact.set(i, e), gi.from_rounded.set(i, r), gi.rho.set(i, std::sqrt(s2));
        }
  return gi;
}

DiagnosisInput grad_input_input(const Conv& g, const Tensor& ref, const Tensor& run, const Tensor& w,
                                const Tensor& rho) {
  DiagnosisInput in = input_for(ref, run, "NCHW", "grad_input");
  in.rtol = 1e-9;  // every element beyond the gate: the profile is made
  in.logical = DType::bfloat16;
  in.input_shapes = {{"weight", w.shape()}};
  BoundOptions o;
  o.dtype = DType::bfloat16;
  o.gradient = true;
  o.n = static_cast<double>(g.O * 9);
  in.bound = DiagnosisInput::ElementBound{view_of(rho), o};
  return in;
}

}  // namespace

// A bfloat16 grad_input: the float64 oracle's (from the exact dL/dy, rounded to nearest) against the
// reference's (from dL/dy rounded to bfloat16) shows no bias over its blocks (sample and row, rows
// up to 2 apart sharing dL/dy rows); the oracle's values stored by truncation lean toward zero,
// named with their size, about -2.8e-3 (half a bfloat16 unit, 2^-8, times the mean of the mantissa's
// reciprocal, about 0.72).
TEST(DiagnosisRoundingSized, AGradientStoredByTruncationShowsItsBiasOverBlocksTheOraclesDoesNot) {
  const Conv g = same_conv(3, 5, 23, 9, 7);
  const Tensor dy = random_tensor({3, 7, 23, 9}, 41), w = random_tensor({7, 5, 3, 3}, 42);
  const GradInput gi = grad_input_of(g, dy, w);
  Tensor ref = gi.from_rounded.clone(), oracle = gi.from_exact.clone(), cut = gi.from_exact.clone();
  for (std::int64_t i = 0; i < ref.numel(); ++i) {
    ref.set(i, round_to_dtype(gi.from_rounded.get(i), DType::bfloat16));
    oracle.set(i, round_to_dtype(gi.from_exact.get(i), DType::bfloat16));
    cut.set(i, validate::testing::bfloat16_truncated(static_cast<float>(gi.from_exact.get(i))));
  }
  const Diagnosis dc = diagnose(grad_input_input(g, ref, oracle, w, gi.rho));
  ASSERT_TRUE(dc.profile.contains("bias")) << dc.profile.dump();
  EXPECT_EQ(dc.profile["bias"]["blocks"].get<std::int64_t>(), 3 * 23);
  EXPECT_EQ(dc.profile["bias"]["dof"].get<double>(), 22);  // 69 blocks in groups of 3 (lag 2), less one
  EXPECT_LT(dc.profile["bias"]["z"].get<double>(), dc.profile["bias"]["threshold"].get<double>()) << dc.profile.dump();
  EXPECT_FALSE(contains(dc.summary, "lean toward")) << dc.summary;
  const Diagnosis dt = diagnose(grad_input_input(g, ref, cut, w, gi.rho));
  EXPECT_TRUE(dt.matches.empty()) << dt.summary;
  EXPECT_GE(dt.profile["bias"]["z"].get<double>(), dt.profile["bias"]["threshold"].get<double>()) << dt.profile.dump();
  EXPECT_NEAR(dt.profile["bias"]["relative"].get<double>(), -0.72 * 0x1p-8, 0.25 * 0x1p-8) << dt.profile.dump();
  EXPECT_TRUE(contains(dt.summary, "lean toward zero")) << dt.summary;
  if (std::getenv("VALIDATE_TEST_PRINT"))
    std::printf("%s\n%s\n%s\n", dc.profile.dump().c_str(), dt.profile.dump().c_str(), dt.summary.c_str());
}

// With an oracle: errors of 2 u (|y| + rho) per element (sums of each element's own terms) are
// named local, exponent near 1; errors of 2 u times the tensor's RMS rho whatever the element (a
// transform's spread) are named the surroundings', exponent near 0. Both stay within the bound (rounding-sized).
TEST(DiagnosisRoundingSized, WithAnOracleTheErrorFollowsEachElementsScaleOrTheTensorsNorm) {
  const Conv g = same_conv(2, 5, 12, 10, 7);
  const Tensor x = random_tensor({2, 5, 12, 10}, 51), w = random_tensor({7, 5, 3, 3}, 52);
  const Tensor exact = reference(g, x, w), scale = conv_scale(g, x, w);
  double rms = 0;
  for (std::int64_t i = 0; i < scale.numel(); ++i) rms += scale.get(i) * scale.get(i) / static_cast<double>(scale.numel());
  rms = std::sqrt(rms);
  std::mt19937 gen(5);
  std::normal_distribution<double> d(0, 1);
  Tensor local = exact.clone(), norm = exact.clone();
  for (std::int64_t i = 0; i < exact.numel(); ++i) {
    const double y = exact.get(i), s = std::fabs(y) + scale.get(i);
    local.set(i, y + 2 * 0x1p-24 * s * d(gen));
    norm.set(i, y + 2 * 0x1p-24 * rms * d(gen));
  }
  for (const auto& [run, expected] : {std::pair{&local, "local"}, {&norm, "norm"}}) {
    DiagnosisInput in = bounded(g, exact, *run, x, w, scale, 1e-9);
    in.exact = view_of(exact);
    const Diagnosis dx = diagnose(in);
    ASSERT_TRUE(dx.profile.contains("scale")) << dx.profile.dump();
    const double a = dx.profile["scale"]["exponent"].get<double>();
    if (std::string(expected) == "local") {
      EXPECT_GT(a, 0.8) << dx.profile.dump();
      EXPECT_TRUE(contains(dx.summary, "follows each element's own scale")) << dx.summary;
    } else {
      EXPECT_LT(a, 0.15) << dx.profile.dump();
      EXPECT_TRUE(contains(dx.summary, "follows the scale of the values around it")) << dx.summary;
    }
    EXPECT_LE(dx.profile["max_over_worst_case"].get<double>(), 1) << dx.profile.dump();
    if (std::getenv("VALIDATE_TEST_PRINT")) std::printf("%s\n", dx.summary.c_str());
  }
  // Without the oracle nothing is said about it.
  EXPECT_FALSE(diagnose(bounded(g, exact, local, x, w, scale, 1e-9)).profile.contains("scale"));
}
