// conv_transpose2d's weight is (in, out/groups, kh, kw) — IOHW. A program that indexes it like a
// conv2d weight (OIHW) computes something that is no re-arrangement of the right output; the
// diagnosis must recompute and name the IOHW/OIHW confusion. Geometry: batch 2, stride 2,
// output_padding, dilation, groups, every axis a different size.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "../compare/fixture.hpp"
#include "narrow_loss.hpp"
#include "validate/diagnosis/diagnosis.hpp"
#include "validate/ops/op.hpp"

using namespace validate;
using namespace validate::compare;

namespace {

struct CT {
  std::int64_t N = 2, C = 4, H = 5, W = 7, O = 6, KH = 2, KW = 5, SH = 2, SW = 2, PH = 1, PW = 2, OPH = 1, OPW = 1,
               DH = 1, DW = 2, G = 2;
  std::int64_t HO() const { return (H - 1) * SH - 2 * PH + DH * (KH - 1) + OPH + 1; }
  std::int64_t WO() const { return (W - 1) * SW - 2 * PW + DW * (KW - 1) + OPW + 1; }
  // Scatter form (independent of the recompute's gather form): every input element adds into
  // the outputs it reaches. `wv(c, oc, u, v)` is the weight as the program indexes it.
  Tensor run(const Tensor& x, const std::function<double(std::int64_t, std::int64_t, std::int64_t, std::int64_t)>& wv) const {
    std::vector<double> y(static_cast<std::size_t>(N * O * HO() * WO()), 0.0);
    const std::int64_t CG = C / G, OG = O / G;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t c = 0; c < C; ++c)
        for (std::int64_t ih = 0; ih < H; ++ih)
          for (std::int64_t iw = 0; iw < W; ++iw)
            for (std::int64_t oc = 0; oc < OG; ++oc)
              for (std::int64_t u = 0; u < KH; ++u)
                for (std::int64_t v = 0; v < KW; ++v) {
                  const std::int64_t oh = ih * SH - PH + u * DH, ow = iw * SW - PW + v * DW;
                  if (oh < 0 || oh >= HO() || ow < 0 || ow >= WO()) continue;
                  const std::int64_t o = (c / CG) * OG + oc;
                  y[static_cast<std::size_t>(((n * O + o) * HO() + oh) * WO() + ow)] +=
                      x.get(((n * C + c) * H + ih) * W + iw) * wv(c, oc, u, v);
                }
    Tensor t(DType::float32, {N, O, HO(), WO()});
    for (std::size_t i = 0; i < y.size(); ++i) t.set(static_cast<std::int64_t>(i), y[i]);
    return t;
  }
};

Tensor ct_random_tensor(const Shape& s, unsigned seed) {
  Tensor t(DType::float32, s);
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, d(gen));
  return t;
}

DiagnosisInput ct_input(const CT& g, const Tensor& ref, const Tensor& run, const Tensor& x, const Tensor& w) {
  DiagnosisInput in;
  in.ref = view_of(ref);
  in.run = view_of(run);
  in.shape = ref.shape();
  in.run_shape = run.shape();
  in.axes = "NCHW";
  in.tensor = "output";
  in.op = ops::Op::conv_transpose2d;
  in.role = ops::Role::output;
  in.rtol = 5e-4;
  double mx = 0;
  for (std::int64_t i = 0; i < ref.numel(); ++i) mx = std::max(mx, std::fabs(ref.get(i)));
  in.floor = 0.01 * mx;
  in.inputs = {{"input", view_of(x)}, {"weight", view_of(w)}};
  in.input_shapes = {{"input", x.shape()}, {"weight", w.shape()}};
  in.conv.stride[0] = g.SH;
  in.conv.stride[1] = g.SW;
  in.conv.padding[0] = g.PH;
  in.conv.padding[1] = g.PW;
  in.conv.dilation[0] = g.DH;
  in.conv.dilation[1] = g.DW;
  in.conv.groups = g.G;
  in.conv.bias = false;
  return in;
}

}  // namespace

TEST(DiagnosisConvTranspose, WeightReadAsOihwIsNamed) {
  const CT g;  // weight (4, 3, 2, 5): in 4, out/groups 3
  // Reading IOHW bytes as OIHW: the same canonical dims, axis O outermost in memory, so element
  // (c, oc, u, v) is taken from offset ((oc * C + c) * KH + u) * KW + v.
  const Tensor x = ct_random_tensor({g.N, g.C, g.H, g.W}, 31), w = ct_random_tensor({g.C, g.O / g.G, g.KH, g.KW}, 32);
  const std::int64_t OG = g.O / g.G;
  auto right = [&](std::int64_t c, std::int64_t oc, std::int64_t u, std::int64_t v) {
    return w.get(((c * OG + oc) * g.KH + u) * g.KW + v);
  };
  auto as_oihw = [&](std::int64_t c, std::int64_t oc, std::int64_t u, std::int64_t v) {
    return w.get(((oc * g.C + c) * g.KH + u) * g.KW + v);
  };
  const Tensor ref = g.run(x, right), run = g.run(x, as_oihw);
  const auto dx = diagnose(ct_input(g, ref, run, x, w));
  ASSERT_NE(dx.named(), nullptr) << dx.summary;
  EXPECT_EQ(dx.named()->code, "weight_layout");
  EXPECT_EQ(dx.named()->tensor, "weight");
  EXPECT_EQ(dx.named()->spec, "OIHW");
  EXPECT_NE(dx.summary.find("IOHW"), std::string::npos) << dx.summary;
  EXPECT_NE(dx.named()->cause.find("IOHW/OIHW"), std::string::npos) << dx.named()->cause;
}

TEST(DiagnosisConvTranspose, CorrectRunAndRandomDifferenceAreNotNamedAsLayout) {
  const CT g;  // groups 2, stride 2, output_padding, dilation, batch 2
  const Tensor x = ct_random_tensor({g.N, g.C, g.H, g.W}, 33), w = ct_random_tensor({g.C, g.O / g.G, g.KH, g.KW}, 34);
  const std::int64_t OG = g.O / g.G;
  auto right = [&](std::int64_t c, std::int64_t oc, std::int64_t u, std::int64_t v) {
    return w.get(((c * OG + oc) * g.KH + u) * g.KW + v);
  };
  const Tensor ref = g.run(x, right);
  Tensor noisy = ref.clone();
  std::mt19937 gen(35);
  std::normal_distribution<float> d(0.f, 0.5f);
  for (std::int64_t i = 0; i < noisy.numel(); ++i) noisy.set(i, noisy.get(i) + d(gen));
  const auto dx = diagnose(ct_input(g, ref, noisy, x, w));
  if (dx.named()) {
    EXPECT_NE(dx.named()->family, "input_layout") << dx.summary;
  }
}

using validate::testing::bf16;  // narrow_loss.hpp

// conv_transpose2d on a bfloat16 case, its output summed with a bfloat16 accumulator (bias first,
// channels innermost, each add in float32): the loss moves and the diagnosis names the
// accumulator from the loss, through conv_transpose2d's own reference. Before the registry
// dispatch only conv2d and matmul were tried here.
TEST(DiagnosisConvTranspose, LossOfANarrowAccumulatorIsNamed) {
  const CT g;
  auto bf16_tensor = [](const Shape& s, unsigned seed) {
    Tensor t = ct_random_tensor(s, seed);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, bf16(t.get(i)));
    return t;
  };
  const std::int64_t CG = g.C / g.G, OG = g.O / g.G;
  const Tensor x = bf16_tensor({g.N, g.C, g.H, g.W}, 36), w = bf16_tensor({g.C, OG, g.KH, g.KW}, 37),
               b = bf16_tensor({g.O}, 38);
  // Gather form, the running sum started at the bias and rounded by `round` after every add.
  auto output = [&](auto round) {
    Tensor y(DType::float32, {g.N, g.O, g.HO(), g.WO()});
    for (std::int64_t n = 0; n < g.N; ++n)
      for (std::int64_t o = 0; o < g.O; ++o)
        for (std::int64_t oh = 0; oh < g.HO(); ++oh)
          for (std::int64_t ow = 0; ow < g.WO(); ++ow) {
            double s = round(b.get(o));
            for (std::int64_t u = 0; u < g.KH; ++u)
              for (std::int64_t v = 0; v < g.KW; ++v)
                for (std::int64_t c = 0; c < CG; ++c) {
                  const std::int64_t th = oh + g.PH - u * g.DH, tw = ow + g.PW - v * g.DW;
                  if (th < 0 || tw < 0 || th % g.SH || tw % g.SW || th / g.SH >= g.H || tw / g.SW >= g.W) continue;
                  const std::int64_t ci = o / OG * CG + c;
                  const std::int64_t ih = th / g.SH, iw = tw / g.SW;
                  s = round(s + static_cast<double>(x.get(((n * g.C + ci) * g.H + ih) * g.W + iw)) *
                                    w.get(((ci * OG + o % OG) * g.KH + u) * g.KW + v));
                }
            y.set(((n * g.O + o) * g.HO() + oh) * g.WO() + ow, s);
          }
    return y;
  };
  const Tensor exact = output([](double v) { return v; });
  const Tensor narrow = output([](double v) { return bf16(static_cast<float>(v)); });
  DiagnosisInput in = ct_input(g, exact, exact, x, w);
  in.conv.bias = true;
  in.inputs["bias"] = view_of(b);
  in.input_shapes["bias"] = b.shape();
  ops::ConvTransposeParams p;
  p.n = g.N, p.c = g.C, p.h = g.H, p.w = g.W, p.o = g.O, p.kh = g.KH, p.kw = g.KW;
  p.stride = {g.SH, g.SW}, p.padding = {g.PH, g.PW}, p.output_padding = {g.OPH, g.OPW};
  p.dilation = {g.DH, g.DW}, p.groups = g.G, p.bias = true;
  ASSERT_EQ(p.hout(), g.HO());
  ASSERT_EQ(p.wout(), g.WO());
  in.params = p;
  validate::testing::expect_narrow_accumulator_named_from_loss(in, exact, narrow, bf16_tensor(exact.shape(), 39));
}
