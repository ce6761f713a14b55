// conv_transpose2d, one output element in place (OpDef::output_element): the gather
//   y[n,o,oh,ow] = sum over c of o's group, kh, kw with oh = ih*s - p + kh*d, ow likewise,
//                  of x[n,c,ih,iw] w[c,o%(O/groups),kh,kw] (+ b[o])
// read through the operands' strides, in the order ElementOptions names: canonical (c, kh, kw)
// or channels_inner (kh, kw, c). Written apart from ref_conv_transpose2d.cpp's forward on
// purpose: tests/ops hold the two against each other.
#include "conv_transpose2d/reference.hpp"
#include "element_sum.hpp"

namespace validate::ops::conv_transpose2d {

namespace {

using element::i64;

// The input position i with i*s - pad + k*d == out, or -1.
inline i64 source(i64 out, i64 s, i64 pad, i64 kd, i64 in) {
  const i64 t = out + pad - kd;
  return t < 0 || t % s || t / s >= in ? -1 : t / s;
}

template <class Load, class Sum>
double products(const ConvTransposeParams& p, i64 n, i64 o, i64 oh, i64 ow, const ElementOperand& x,
                const ElementOperand& w, SumOrder order, Load load, Sum sum, double s) {
  const i64 og = p.o / p.groups, cg = p.c / p.groups, c0 = o / og * cg, oc = o % og;
  const i64 xn = x.base + n * x.stride[0] + c0 * x.stride[1], wo = w.base + c0 * w.stride[0] + oc * w.stride[1];
  auto row = [&](i64 u) { return source(oh, p.stride[0], p.padding[0], u * p.dilation[0], p.h); };
  auto col = [&](i64 v) { return source(ow, p.stride[1], p.padding[1], v * p.dilation[1], p.w); };
  if (order == SumOrder::channels_inner) {
    for (i64 u = 0; u < p.kh; ++u) {
      const i64 y = row(u);
      if (y < 0) continue;
      for (i64 v = 0; v < p.kw; ++v) {
        const i64 xx = col(v);
        if (xx < 0) continue;
        const i64 xo = xn + y * x.stride[2] + xx * x.stride[3], wv = wo + u * w.stride[2] + v * w.stride[3];
        for (i64 c = 0; c < cg; ++c) s = sum(s, load(x, xo + c * x.stride[1]) * load(w, wv + c * w.stride[0]));
      }
    }
    return s;
  }
  for (i64 c = 0; c < cg; ++c) {
    const i64 xc = xn + c * x.stride[1], wc = wo + c * w.stride[0];
    for (i64 u = 0; u < p.kh; ++u) {
      const i64 y = row(u);
      if (y < 0) continue;
      const i64 xr = xc + y * x.stride[2], wr = wc + u * w.stride[2];
      for (i64 v = 0; v < p.kw; ++v) {
        const i64 xx = col(v);
        if (xx < 0) continue;
        s = sum(s, load(x, xr + xx * x.stride[3]) * load(w, wr + v * w.stride[3]));
      }
    }
  }
  return s;
}

}  // namespace

double output_element(const ConvTransposeParams& p, std::int64_t i, const ElementOperands& in,
                      const ElementOptions& opt) {
  const i64 Wo = p.wout(), Ho = p.hout();
  const i64 ow = i % Wo, oh = i / Wo % Ho, o = i / (Wo * Ho) % p.o, n = i / (Wo * Ho * p.o);
  const ElementOperand &x = in.slot[0], &w = in.slot[1], &b = in.slot[2];
  return element::sum_element(x.plain() && w.plain(), opt, p.bias && b, element::scaled_bias(p.bias, b, o, opt),
                              [&](auto load, auto sum, double s) {
                                return products(p, n, o, oh, ow, x, w, opt.order, load, sum, s);
                              });
}

}  // namespace validate::ops::conv_transpose2d
