// conv_transpose2d, one output element in place (OpDef::output_element): the gather
//   y[n,o,oh,ow] = sum over c of o's group, kh, kw with oh = ih*s - p + kh*d, ow likewise,
//                  of x[n,c,ih,iw] w[c,o%(O/groups),kh,kw] (+ b[o])
// read through the operands' strides, in the order ElementOptions names: canonical (c, kh, kw)
// or channels_inner (kh, kw, c). Written apart from ref_conv_transpose2d.cpp's forward on
// purpose: tests/runners/test_output_element.cpp holds the two against each other.
#include "conv_transpose2d/reference.hpp"
#include "element_sum.hpp"

namespace validate::ops::conv_transpose2d {

namespace {
// The input position i with i*s - pad + k*d == out, or -1.
inline std::int64_t source(std::int64_t out, std::int64_t s, std::int64_t pad, std::int64_t kd, std::int64_t in) {
  const std::int64_t t = out + pad - kd;
  return t < 0 || t % s || t / s >= in ? -1 : t / s;
}
}  // namespace

double output_element(const ConvTransposeParams& p, std::int64_t i, const ElementOperands& in,
                      const ElementOptions& opt) {
  using element::i64;
  const i64 Wo = p.wout(), Ho = p.hout();
  const i64 ow = i % Wo, oh = i / Wo % Ho, o = i / (Wo * Ho) % p.o, n = i / (Wo * Ho * p.o);
  const ElementOperand &x = in.slot[0], &w = in.slot[1], &b = in.slot[2];
  const i64 og = p.o / p.groups, cg = p.c / p.groups, c0 = o / og * cg;
  auto row = [&](i64 u) { return source(oh, p.stride[0], p.padding[0], u * p.dilation[0], p.h); };
  auto col = [&](i64 v) { return source(ow, p.stride[1], p.padding[1], v * p.dilation[1], p.w); };
  return element::sum_element(
      x.plain() && w.plain(), opt, p.bias && b, element::scaled_bias(p.bias, b, o, opt),
      [&](auto load, auto sum, double s) {
        return element::window_products(cg, p.kh, p.kw, row, col, x, x.base + n * x.stride[0] + c0 * x.stride[1],
                                        x.stride[1], w, w.base + c0 * w.stride[0] + o % og * w.stride[1], w.stride[0],
                                        opt.order, load, sum, s);
      });
}

}  // namespace validate::ops::conv_transpose2d
