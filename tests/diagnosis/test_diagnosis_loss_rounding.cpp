// The loss held against the program's own stored output.
#include <gtest/gtest.h>

#include "diagnosis_fixture.hpp"

// The loss held against the program's own stored output (bfloat16 case, all-distinct geometry):
// a loss on the unrounded output fails even where it is inside the loss gate; the loss of the
// stored output, or the reference's, or a right loss next to a wrongly written output, do not.
TEST(LossRoundingCheck, UnroundedLossFailsAndHonestLossesDoNot) {
  const Conv g = kOdd;
  Tensor x = random_tensor({g.N, g.C, g.H, g.W}, 61), w = random_tensor({g.O, g.C / g.G, g.KH, g.KW}, 62);
  auto bf16 = [](double v) { return round_bits(static_cast<float>(v), 8); };
  for (std::int64_t i = 0; i < x.numel(); ++i) x.set(i, bf16(x.get(i)));
  for (std::int64_t i = 0; i < w.numel(); ++i) w.set(i, bf16(w.get(i)));
  auto X = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t ww) {
    return static_cast<double>(x.get(((n * g.C + c) * g.H + h) * g.W + ww));
  };
  auto Wt = [&](std::int64_t o, std::int64_t c, std::int64_t u, std::int64_t v) {
    return static_cast<double>(w.get(((o * (g.C / g.G) + c) * g.KH + u) * g.KW + v));
  };
  // y in float64 (kept in a double vector: the float32 Tensor would round it), stored as bf16.
  Tensor y32 = g.run(X, Wt, nullptr);
  std::vector<double> y(static_cast<std::size_t>(y32.numel()));
  {
    const std::int64_t CG = g.C / g.G, OG = g.O / g.G;
    std::size_t i = 0;
    for (std::int64_t n = 0; n < g.N; ++n)
      for (std::int64_t o = 0; o < g.O; ++o)
        for (std::int64_t oh = 0; oh < g.HO(); ++oh)
          for (std::int64_t ow = 0; ow < g.WO(); ++ow, ++i) {
            double s = 0;
            for (std::int64_t c = 0; c < CG; ++c)
              for (std::int64_t u = 0; u < g.KH; ++u)
                for (std::int64_t v = 0; v < g.KW; ++v) {
                  const std::int64_t ih = oh * g.SH - g.PH + u * g.DH, iw = ow * g.SW - g.PW + v * g.DW;
                  if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                  s += X(n, (o / OG) * CG + c, ih, iw) * Wt(o, c, u, v);
                }
            y[i] = s;
          }
  }
  Tensor t = random_tensor(y32.shape(), 63), stored(DType::float32, y32.shape());
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, bf16(t.get(i)));
  double lu = 0, ls = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double r = bf16(y[i]);
    stored.set(static_cast<std::int64_t>(i), r);
    lu += (y[i] - t.get(static_cast<std::int64_t>(i))) * (y[i] - t.get(static_cast<std::int64_t>(i)));
    ls += (r - t.get(static_cast<std::int64_t>(i))) * (r - t.get(static_cast<std::int64_t>(i)));
  }
  lu /= static_cast<double>(y.size());
  ls /= static_cast<double>(y.size());
  ASSERT_GT(std::fabs(lu - ls), 1e-5 * ls) << "the geometry must make the rounding visible";
  auto in = conv_input(g, stored, stored, x, w, nullptr);
  in.role = ops::Role::loss;
  in.logical = DType::bfloat16;
  in.inputs["target"] = view_of(t);
  in.input_shapes["target"] = t.shape();
  in.input_shapes["output"] = t.shape();
  in.ref_loss = static_cast<float>(ls);
  // The mistake: the loss of the unrounded output (as float32), with the right stored output.
  in.run_loss = static_cast<float>(lu);
  auto c = check_loss_rounding(in, view_of(stored));
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->failed) << c->ratio;
  EXPECT_LT(c->ratio, LossRoundingCheck::kLimit);
  EXPECT_NEAR(c->unrounded, lu, 1e-12 * lu);
  EXPECT_NEAR(c->stored, ls, 1e-12 * ls);
  EXPECT_NE(c->message.find("loss taken on the unrounded output"), std::string::npos) << c->message;
  EXPECT_NE(c->message.find("round the output to bfloat16 first"), std::string::npos) << c->message;
  // Honest: the loss of the stored output, to float32.
  in.run_loss = static_cast<float>(ls);
  c = check_loss_rounding(in, view_of(stored));
  EXPECT_TRUE(!c || !c->failed);
  // A reduction noisier than 8 float32 units (a naive float32 sum): decided, and still honest.
  in.run_loss = ls * (1 + 40 * std::ldexp(1.0, -24));
  c = check_loss_rounding(in, view_of(stored));
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(c->failed) << c->ratio;
  // The right loss next to an output written in the wrong layout: the loss is the rounded one.
  in.run_loss = static_cast<float>(ls) * (1 + 20 * std::ldexp(1.0, -24));
  Tensor swapped = permuted_bytes(stored, {0, 1, 3, 2});
  c = check_loss_rounding(in, view_of(swapped));
  EXPECT_TRUE(!c || !c->failed) << (c ? c->ratio : 0);
  // float32 cases: nothing to check.
  in.logical = DType::float32;
  EXPECT_FALSE(check_loss_rounding(in, view_of(stored)).has_value());
}
