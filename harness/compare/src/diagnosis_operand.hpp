#pragma once
// The operand of the input-side recomputes (diagnosis_conv_recompute.cpp,
// diagnosis_conv_transpose_recompute.cpp).
#include <cstdint>

#include "diagnosis_internal.hpp"

namespace validate::compare::detail {

// One operand as the program reads it: canonical index -> element of the bytes it was handed,
// as signed strides and an offset (a flipped axis has a negative stride), so the inner loop is a
// multiply-add of two strided loads (the search runs ~150 hypotheses of K multiply-adds each).
struct Operand {
  ArrayView bytes;
  layout::Placement m;
  Rounding round = Rounding::none;
  std::int64_t stride[4] = {0, 0, 0, 0}, base = 0;
  void prepare() {
    const layout::Gather g = layout::from_layout_gather(m);
    for (std::size_t a = 0; a < 4 && a < g.src_strides.size(); ++a) stride[a] = g.src_strides[a];
    base = g.src_offset;
  }
  double load(std::int64_t off) const {
    const float v = bytes.storage == DType::float32
                        ? reinterpret_cast<const float*>(bytes.data)[off]
                        : read_value(bytes, off);
    return round == Rounding::none ? v : round_as(v, round);
  }
};

// The bias lost or doubled: `run(h, bias_scale)` recomputes with the bias times 0 or 2.
template <class Run>
void bias_hypotheses(Run&& run) {
  for (double scale : {0.0, 2.0}) {
    Hypothesis h;
    h.code = scale == 0 ? "bias_missing" : "bias_doubled";
    h.tensor = "bias";
    h.side = "numeric";
    h.family = "numeric";
    h.spec = scale == 0 ? "bias=0" : "bias*2";
    h.rank = 30;
    h.description = scale == 0 ? "recomputed without the bias" : "recomputed with the bias added twice";
    h.cause = scale == 0 ? "the bias never added" : "the bias added twice (e.g. by the library and again by hand)";
    h.fix = scale == 0 ? "add bias[o] to every output of channel o" : "add the bias once";
    run(std::move(h), scale);
  }
}

}  // namespace validate::compare::detail
