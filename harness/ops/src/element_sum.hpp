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

// The bias of output channel o, scaled (0 when the case has none or it was not given).
inline double scaled_bias(bool case_has_bias, const ElementOperand& b, i64 o, const ElementOptions& opt) {
  return case_has_bias && b ? opt.bias_scale * b.load(b.base + o * b.stride[0]) : 0.0;
}

}  // namespace validate::ops::element
