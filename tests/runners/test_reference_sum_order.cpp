// The op reference's summation-order options (ops::ReferenceOptions::order, bias_first): with a
// narrow accumulator the result is that of the loop nest they name, element for element, against
// loop nests written out here from the definitions (conv2d: cross-correlation; conv_transpose2d:
// its gather form). The defaults are the oracle's sums (tests/runners/test_oracle.cpp pins those).
// Geometry: batch 2, groups 2, stride, padding, dilation, a bias, every axis a different size.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "validate/ops/registry.hpp"

using namespace validate;

namespace {

using i64 = std::int64_t;
constexpr double kNone = std::numeric_limits<double>::quiet_NaN();  // no term at this position

// The float16 value nearest to v (ties to even), rounded once from double; normal range only
// (the sums here stay far from 2^-14 and 65504).
double to_half(double v) {
  if (v == 0) return v;
  int e;
  std::frexp(v, &e);
  const double scale = std::ldexp(1.0, 11 - e);
  return std::nearbyint(v * scale) / scale;
}

std::vector<double> sum_order_normals(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(0, 1);
  std::vector<double> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

// One output element's sum: `term(c, u, v)` is the product or kNone, in the order
// (c, u, v) or, channels inner, (u, v, c); the bias first or last; rounded after every add.
template <class Term>
double narrow_sum(i64 channels, i64 kh, i64 kw, bool channels_inner, bool bias_first, double bias,
                  Term term) {
  double s = bias_first ? to_half(bias) : 0;
  auto add = [&](i64 c, i64 u, i64 v) {
    const double t = term(c, u, v);
    if (!std::isnan(t)) s = to_half(s + t);
  };
  if (channels_inner) {
    for (i64 u = 0; u < kh; ++u)
      for (i64 v = 0; v < kw; ++v)
        for (i64 c = 0; c < channels; ++c) add(c, u, v);
  } else {
    for (i64 c = 0; c < channels; ++c)
      for (i64 u = 0; u < kh; ++u)
        for (i64 v = 0; v < kw; ++v) add(c, u, v);
  }
  return bias_first ? s : to_half(s + bias);
}

// Runs the registry's reference for `p` on x, w, b with `opt`; returns the output.
std::vector<double> reference_output(const ops::OpParams& p, std::vector<double>& x,
                                     std::vector<double>& w, std::vector<double>& b,
                                     const ops::ReferenceOptions& opt) {
  const ops::OpDef& def = ops::find(ops::op_of(p));
  std::vector<double> y, t;
  ops::Views v;
  for (const auto& info : def.tensors(p)) {
    if (info.name == "input") v["input"] = ops::dense_view(x, info.shape);
    if (info.name == "weight") v["weight"] = ops::dense_view(w, info.shape);
    if (info.name == "bias") v["bias"] = ops::dense_view(b, info.shape);
    if (info.name == "output") {
      y.assign(static_cast<std::size_t>(shape_numel(info.shape)), 0.0);
      t.assign(y.size(), 0.0);
      v["output"] = ops::dense_view(y, info.shape);
      v["target"] = ops::dense_view(t, info.shape);
    }
  }
  def.reference(p, v, opt);
  return y;
}

// f(n, o, oh, ow) for every output element, in C order.
template <class F>
std::vector<double> each_output(i64 batch, i64 channels, i64 ho, i64 wo, F f) {
  std::vector<double> y;
  for (i64 n = 0; n < batch; ++n)
    for (i64 o = 0; o < channels; ++o)
      for (i64 oh = 0; oh < ho; ++oh)
        for (i64 ow = 0; ow < wo; ++ow) y.push_back(f(n, o, oh, ow));
  return y;
}

struct Variant {
  ops::SumOrder order;
  bool bias_first;
};
const Variant kVariants[] = {{ops::SumOrder::canonical, false},
                             {ops::SumOrder::canonical, true},
                             {ops::SumOrder::channels_inner, false},
                             {ops::SumOrder::channels_inner, true}};

// Each variant equals its loop nest exactly, and the four differ from each other (the options
// are not ignored: a test of them that could not fail would be worthless).
template <class Expect>
void check_variants(const ops::OpParams& p, std::vector<double>& x, std::vector<double>& w,
                    std::vector<double>& b, Expect expect) {
  std::vector<std::vector<double>> got;
  for (const Variant& var : kVariants) {
    ops::ReferenceOptions opt;
    opt.accumulation = ops::Accumulation::float16;
    opt.order = var.order;
    opt.bias_first = var.bias_first;
    const auto y = reference_output(p, x, w, b, opt);
    const auto want = expect(var.order == ops::SumOrder::channels_inner, var.bias_first);
    ASSERT_EQ(y.size(), want.size());
    i64 differ = 0;
    for (std::size_t i = 0; i < y.size(); ++i) differ += y[i] != want[i];
    EXPECT_EQ(differ, 0) << "order " << static_cast<int>(var.order) << " bias_first "
                         << var.bias_first;
    got.push_back(y);
  }
  for (std::size_t a = 0; a < got.size(); ++a)
    for (std::size_t c = a + 1; c < got.size(); ++c) EXPECT_NE(got[a], got[c]) << a << " vs " << c;
  // float64 in another order: the fast kernels' sums to the last bits, not bitwise.
  ops::ReferenceOptions fast, inner;
  inner.order = ops::SumOrder::channels_inner;
  inner.bias_first = true;
  const auto y0 = reference_output(p, x, w, b, fast), y1 = reference_output(p, x, w, b, inner);
  for (std::size_t i = 0; i < y0.size(); ++i)
    EXPECT_NEAR(y1[i], y0[i], 1e-12 * (1 + std::fabs(y0[i])));
}

}  // namespace

TEST(ReferenceSumOrder, Conv2dFollowsTheLoopNestItNames) {
  ops::ConvParams p;
  p.n = 2, p.c = 6, p.h = 7, p.w = 9, p.o = 4, p.kh = 3, p.kw = 2;
  p.stride = {2, 1}, p.padding = {1, 0}, p.dilation = {1, 2}, p.groups = 2, p.bias = true;
  const i64 Cg = p.c / p.groups, Og = p.o / p.groups, Ho = p.hout(), Wo = p.wout();
  auto x = sum_order_normals(static_cast<std::size_t>(p.n * p.c * p.h * p.w), 1);
  auto w = sum_order_normals(static_cast<std::size_t>(p.o * Cg * p.kh * p.kw), 2);
  auto b = sum_order_normals(static_cast<std::size_t>(p.o), 3);
  check_variants(p, x, w, b, [&](bool inner, bool bias_first) {
    return each_output(p.n, p.o, Ho, Wo, [&](i64 n, i64 o, i64 oh, i64 ow) {
      return narrow_sum(
          Cg, p.kh, p.kw, inner, bias_first, b[static_cast<std::size_t>(o)],
          [&](i64 c, i64 u, i64 v) {
            const i64 ih = oh * p.stride[0] - p.padding[0] + u * p.dilation[0],
                      iw = ow * p.stride[1] - p.padding[1] + v * p.dilation[1];
            if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) return kNone;
            const i64 ci = o / Og * Cg + c;
            return x[static_cast<std::size_t>(((n * p.c + ci) * p.h + ih) * p.w + iw)] *
                   w[static_cast<std::size_t>(((o * Cg + c) * p.kh + u) * p.kw + v)];
          });
    });
  });
}

TEST(ReferenceSumOrder, ConvTranspose2dFollowsTheLoopNestItNames) {
  ops::ConvTransposeParams p;
  p.n = 2, p.c = 4, p.h = 5, p.w = 7, p.o = 6, p.kh = 2, p.kw = 5;
  p.stride = {2, 2}, p.padding = {1, 2}, p.output_padding = {1, 1}, p.dilation = {1, 2},
  p.groups = 2;
  p.bias = true;
  const i64 Cg = p.c / p.groups, Og = p.o / p.groups, Ho = p.hout(), Wo = p.wout();
  auto x = sum_order_normals(static_cast<std::size_t>(p.n * p.c * p.h * p.w), 4);
  auto w = sum_order_normals(static_cast<std::size_t>(p.c * Og * p.kh * p.kw), 5);  // IOHW
  auto b = sum_order_normals(static_cast<std::size_t>(p.o), 6);
  check_variants(p, x, w, b, [&](bool inner, bool bias_first) {
    return each_output(p.n, p.o, Ho, Wo, [&](i64 n, i64 o, i64 oh, i64 ow) {
      return narrow_sum(
          Cg, p.kh, p.kw, inner, bias_first, b[static_cast<std::size_t>(o)],
          [&](i64 c, i64 u, i64 v) {
            // x[n, ci, ih, iw] reaches y[n, o, ih*s - p + u*d, iw*s - p + v*d].
            const i64 th = oh + p.padding[0] - u * p.dilation[0],
                      tw = ow + p.padding[1] - v * p.dilation[1];
            if (th < 0 || tw < 0 || th % p.stride[0] || tw % p.stride[1]) return kNone;
            const i64 ih = th / p.stride[0], iw = tw / p.stride[1];
            if (ih >= p.h || iw >= p.w) return kNone;
            const i64 ci = o / Og * Cg + c;
            return x[static_cast<std::size_t>(((n * p.c + ci) * p.h + ih) * p.w + iw)] *
                   w[static_cast<std::size_t>(((ci * Og + o % Og) * p.kh + u) * p.kw + v)];
          });
    });
  });
}

// Every op names the orders its reference follows, canonical first; matmul has one.
TEST(ReferenceSumOrder, EveryOpListsItsOrders) {
  for (const ops::OpDef* def : ops::registry()) {
    const auto orders = def->sum_orders();
    ASSERT_FALSE(orders.empty()) << def->name();
    EXPECT_EQ(orders[0].order, ops::SumOrder::canonical) << def->name();
  }
  EXPECT_EQ(ops::find(ops::Op::matmul).sum_orders().size(), 1u);
  EXPECT_STREQ(ops::find(ops::Op::matmul).sum_orders()[0].name, "k");
  EXPECT_STREQ(ops::find(ops::Op::conv2d).sum_orders()[1].name, "kh,kw,c");
  EXPECT_STREQ(ops::find(ops::Op::conv_transpose2d).sum_orders()[1].name, "kh,kw,c");
}
