#pragma once
// The float64 reference's vocabulary, shared by every op's ref_<op>.cpp: a tensor addressed by
// canonical multi-index through per-axis strides (so the reference reads any layout's memory
// without a copy), the accumulation rounding option, and the MSE loss every op ends in.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "validate/core/dtype.hpp"

namespace validate::ops {

// A float64 tensor in some layout's memory, addressed by canonical multi-index.
struct View {
  double* data = nullptr;
  std::int64_t offset = 0;
  std::array<std::int64_t, 4> stride{};  // per canonical axis, in elements; negative when flipped

  explicit operator bool() const { return data != nullptr; }
  double& at(std::int64_t i0) const { return data[offset + i0 * stride[0]]; }
  double& at(std::int64_t i0, std::int64_t i1) const {
    return data[offset + i0 * stride[0] + i1 * stride[1]];
  }
  double& at(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) const {
    return data[offset + i0 * stride[0] + i1 * stride[1] + i2 * stride[2] + i3 * stride[3]];
  }
};

// A contiguous (C-order, canonical) view over `data` of `shape` (rank <= 4).
inline View dense_view(std::vector<double>& data, const std::vector<std::int64_t>& shape) {
  View v;
  v.data = data.data();
  std::int64_t st = 1;
  for (std::size_t a = shape.size(); a-- > 0;) {
    v.stride[a] = st;
    st *= shape[a];
  }
  return v;
}

// How the reference accumulates a reduction. float64 (the default) is the oracle. The narrow
// modes round the running sum to that type after every add, in the op's canonical order: what a
// stack that accumulates in a narrow type computes, so the diagnosis can recompute "your sums were
// accumulated in float16" and compare. Products are exact in float64 either way.
enum class Accumulation { float64, float32, bfloat16, float16 };
const char* accumulation_name(Accumulation a);

// Rounds a running sum as `a` says (identity for float64).
inline double accumulate(double sum, double term, Accumulation a) {
  switch (a) {
    case Accumulation::float64: return sum + term;
    case Accumulation::float32: return round_to_dtype(sum + term, DType::float32);
    case Accumulation::bfloat16: return round_to_dtype(sum + term, DType::bfloat16);
    case Accumulation::float16: return round_to_dtype(sum + term, DType::float16);
  }
  return sum + term;
}

// The tensors of one reference evaluation, by the names of the op's tensor table. Inputs are
// read, produced tensors (output, grads) written; an absent produced tensor is not computed
// (an optional bias of a case without one, a gradient nobody asked for).
using Views = std::map<std::string, View>;

inline View view_of(const Views& v, const char* name) {
  auto it = v.find(name);
  return it == v.end() ? View{} : it->second;
}

// The order in which the terms of each forward sum enter the running sum. In float64 the order
// only moves the last bits; with a narrow accumulator it decides the result, so the diagnosis
// recomputes the orders real loop nests use. An op lists the orders it follows
// (OpDef::sum_orders); one it does not list is its canonical order. The backward sums always run
// in the canonical order.
enum class SumOrder {
  canonical,       // the op's canonical order, stated in <op>/reference.hpp
  channels_inner,  // convolutions: the kernel window outer, the channels innermost, (kh, kw, c):
                   // a channels-last loop nest
};

struct ReferenceOptions {
  int threads = 1;
  Accumulation accumulation = Accumulation::float64;
  SumOrder order = SumOrder::canonical;
  // The forward's running sum starts at the bias (a loop `s = b[o]; for ... s += ...`) instead of
  // adding it after the products (the canonical order).
  bool bias_first = false;
  DType loss_on = DType::float64;  // the output is rounded to this once before the loss

  // The defaults: float64, canonical order, bias last. The oracle's fast kernels run exactly
  // then; anything else takes an op's element-by-element path in the order asked for.
  bool is_oracle_order() const {
    return accumulation == Accumulation::float64 && order == SumOrder::canonical && !bias_first;
  }
};

// mean((round(y) - t)^2) over a contiguous canonical walk of a rank-`shape.size()` tensor (rank 2
// or 4), Neumaier-compensated; fills dy (canonical, contiguous) with 2 (round(y) - t) / numel.
double mse(const std::vector<std::int64_t>& shape, const View& y, const View& t, DType output_dtype,
           std::vector<double>& dy);

}  // namespace validate::ops
