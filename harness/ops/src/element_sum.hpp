#pragma once
// Private to the ops' element paths (<op>/element_<op>.cpp): the loads and the running sums an
// element's sum is instantiated with, and the bias before or after the products. Picked once per
// element, so the inner loop of each op is a plain strided multiply-add (no call per term).
#include <cstdint>

#include "validate/ops/element.hpp"

namespace validate::ops::element {

using i64 = std::int64_t;

// float32 bytes used as they are: one load, no conversion, no rounding.
struct PlainLoad {
  double operator()(const ElementOperand& o, i64 off) const { return static_cast<const float*>(o.data)[off]; }
};
// Any storage, with the operand's per-load rounding.
struct AnyLoad {
  double operator()(const ElementOperand& o, i64 off) const { return o.load(off); }
};
// The float64 running sum.
struct WideSum {
  double operator()(double s, double t) const { return s + t; }
};
// The running sum rounded to a narrow type after every add (ops::accumulate: once, from the
// exact double sum), as the reference's element-by-element path does.
struct NarrowSum {
  Accumulation a;
  double operator()(double s, double t) const { return accumulate(s, t, a); }
};

// The same, each add done in float32 and stored in the narrow type (ElementOptions::float32_adds).
struct Float32AddSum {
  DType narrow;
  double operator()(double s, double t) const { return round_to_dtype(static_cast<float>(s + t), narrow); }
};

// Runs products(load, sum, start) -> the sum of the products added to `start` with the load and
// sum that fit (the float32 fast path when `plain` and the sum is float64), and places the bias
// as `opt` says: first (the running sum starts at it) or last (added after the products).
// `bias` is already scaled by opt.bias_scale; `has_bias` false: no bias term at all.
template <class Products>
double sum_element(bool plain, const ElementOptions& opt, bool has_bias, double bias, Products&& products) {
  auto run = [&](auto load, auto sum) {
    const bool first = has_bias && opt.bias_first;
    const double s = products(load, sum, first ? sum(0.0, bias) : 0.0);
    return has_bias && !first ? sum(s, bias) : s;
  };
  switch (opt.accumulation) {
    case Accumulation::float64: break;
    case Accumulation::float32: return run(AnyLoad{}, NarrowSum{opt.accumulation});  // one rounding either way
    case Accumulation::bfloat16:
      return opt.float32_adds ? run(AnyLoad{}, Float32AddSum{DType::bfloat16}) : run(AnyLoad{}, NarrowSum{opt.accumulation});
    case Accumulation::float16:
      return opt.float32_adds ? run(AnyLoad{}, Float32AddSum{DType::float16}) : run(AnyLoad{}, NarrowSum{opt.accumulation});
  }
  return plain ? run(PlainLoad{}, WideSum{}) : run(AnyLoad{}, WideSum{});
}

// The products of one convolution-like output element added to s: for every channel c < cg and
// kernel position (u, v) whose input row row(u) and column col(v) exist (-1: padding, or no input
// position maps there), x[x0 + c*xc + row*x.stride[2] + col*x.stride[3]] times
// w[w0 + c*wc + u*w.stride[2] + v*w.stride[3]], in `order`: canonical (c, u, v) or channels_inner
// (u, v, c). conv2d and conv_transpose2d differ only in row/col and in which weight axis is the
// channel (wc).
template <class Row, class Col, class Load, class Sum>
double window_products(i64 cg, i64 kh, i64 kw, Row row, Col col, const ElementOperand& x, i64 x0, i64 xc,
                       const ElementOperand& w, i64 w0, i64 wc, SumOrder order, Load load, Sum sum, double s) {
  if (order == SumOrder::channels_inner) {
    for (i64 u = 0; u < kh; ++u) {
      const i64 y = row(u);
      if (y < 0) continue;
      for (i64 v = 0; v < kw; ++v) {
        const i64 xx = col(v);
        if (xx < 0) continue;
        const i64 xo = x0 + y * x.stride[2] + xx * x.stride[3], wo = w0 + u * w.stride[2] + v * w.stride[3];
        for (i64 c = 0; c < cg; ++c) s = sum(s, load(x, xo + c * xc) * load(w, wo + c * wc));
      }
    }
    return s;
  }
  for (i64 c = 0; c < cg; ++c) {
    for (i64 u = 0; u < kh; ++u) {
      const i64 y = row(u);
      if (y < 0) continue;
      const i64 xr = x0 + c * xc + y * x.stride[2], wr = w0 + c * wc + u * w.stride[2];
      for (i64 v = 0; v < kw; ++v) {
        const i64 xx = col(v);
        if (xx < 0) continue;
        s = sum(s, load(x, xr + xx * x.stride[3]) * load(w, wr + v * w.stride[3]));
      }
    }
  }
  return s;
}

// The bias of output channel o, scaled (0 when the case has none or it was not given).
inline double scaled_bias(bool case_has_bias, const ElementOperand& b, i64 o, const ElementOptions& opt) {
  return case_has_bias && b ? opt.bias_scale * b.load(b.base + o * b.stride[0]) : 0.0;
}

}  // namespace validate::ops::element
