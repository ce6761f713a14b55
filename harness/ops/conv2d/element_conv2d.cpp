// conv2d, one output element in place (OpDef::output_element): the direct sum
//   y[n,o,oh,ow] = sum over c of o's group, kh, kw of x[n,c,oh*s-p+kh*d,ow*s-p+kw*d] w[o,c,kh,kw] (+ b[o])
// read through the operands' strides, in the order ElementOptions names: canonical (c, kh, kw)
// or channels_inner (kh, kw, c). Written apart from ref_conv2d.cpp's conv_forward_acc on
// purpose: tests/runners/test_output_element.cpp holds the two against each other.
#include "conv2d/reference.hpp"
#include "element_sum.hpp"

namespace validate::ops::conv2d {

double output_element(const ConvParams& p, std::int64_t i, const ElementOperands& in, const ElementOptions& opt) {
  using element::i64;
  const i64 Wo = p.wout(), Ho = p.hout();
  const i64 ow = i % Wo, oh = i / Wo % Ho, o = i / (Wo * Ho) % p.o, n = i / (Wo * Ho * p.o);
  const ElementOperand &x = in.slot[0], &w = in.slot[1], &b = in.slot[2];
  const i64 cg = p.c / p.groups, c0 = o / (p.o / p.groups) * cg;
  // The input row/column kernel position u/v reads, or -1 in the padding.
  auto row = [&](i64 u) {
    const i64 y = oh * p.stride[0] - p.padding[0] + u * p.dilation[0];
    return y < p.h ? y : -1;
  };
  auto col = [&](i64 v) {
    const i64 y = ow * p.stride[1] - p.padding[1] + v * p.dilation[1];
    return y < p.w ? y : -1;
  };
  return element::sum_element(
      x.plain() && w.plain(), opt, p.bias && b, element::scaled_bias(p.bias, b, o, opt),
      [&](auto load, auto sum, double s) {
        return element::window_products(cg, p.kh, p.kw, row, col, x, x.base + n * x.stride[0] + c0 * x.stride[1],
                                        x.stride[1], w, w.base + o * w.stride[0], w.stride[1], opt.order, load, sum, s);
      });
}

}  // namespace validate::ops::conv2d
