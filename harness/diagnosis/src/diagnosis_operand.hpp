#pragma once
// The input-side recomputes (diagnosis_<op>_recompute.cpp): an operand as the program read it,
// and the op's own per-element sum (ops::OpDef::output_element, harness/ops/<op>/element_<op>.cpp)
// over those operands. The families here only choose the readings; the sums live with the op.
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "diagnosis_internal.hpp"
#include "validate/ops/registry.hpp"

namespace validate::compare::detail {

// The operand rounding of the element path for a rounding of the diagnosis (float32: none, the
// values are float32 already).
ops::LoadRounding load_rounding_of(Rounding r);

// One operand as the program reads it: the bytes it was handed through a reading `m` (canonical
// index -> element, as signed strides and an offset; a flipped axis has a negative stride),
// rounded as `round` says on every load. prepare() turns the reading into strides once per
// hypothesis; the sums then read `e` in place.
struct Operand {
  ArrayView bytes;
  layout::Placement m;
  Rounding round = Rounding::none;
  ops::ElementOperand e{};
  void prepare() {
    const layout::Gather g = layout::from_layout_gather(m);
    e.data = bytes.data;
    e.storage = bytes.storage;
    e.round = load_rounding_of(round);
    for (std::size_t a = 0; a < 4 && a < g.src_strides.size(); ++a) e.stride[a] = g.src_strides[a];
    e.base = g.src_offset;
  }
};

// An op's output elements recomputed from operands given by slot name: the op, its parameters
// (rebuilt from the diagnosis input's shapes and geometry) and the operands that do not change
// between hypotheses (a convolution's bias).
struct ElementRecompute {
  const ops::OpDef* def = nullptr;
  ops::OpParams params;
  ops::ElementOperands fixed;

  ElementRecompute(ops::Op op, ops::OpParams p) : def(&ops::find(op)), params(std::move(p)), fixed(def->element_operands()) {}
  // `fixed` with the two operands named a and b, prepared.
  ops::ElementOperands with(const char* a, Operand x, const char* b, Operand y) const {
    x.prepare();
    y.prepare();
    ops::ElementOperands in = fixed;
    in[a] = x.e;
    in[b] = y.e;
    return in;
  }
  double at(std::int64_t i, const ops::ElementOperands& in, const ops::ElementOptions& opt) const {
    return def->output_element(params, i, in, opt);
  }
};

// The float64 value of the tensor under test at canonical position p, summed as the options say
// (a narrow accumulator, an order): an op's own output element, or a gradient's sum written as one.
using ElementValue = std::function<double(std::int64_t, const ops::ElementOptions&)>;

// One narrow-accumulator hypothesis recomputed with `opt` (diagnosis_narrow_accumulation.cpp):
// added to the search, passing only when it reproduces the run and leaves at most 1/kNarrowFactor
// of the clean float64 recompute's residual (`value` with recompute_options(); `clean`, computed on
// first need and kept for the caller's next try). Returns whether it passed. `clean_first`: the
// clean residual is computed before the hypothesis, whose sum then stops at the first position
// that rules it out (for long reductions, where most hypotheses are turned down by the factor rule
// rather than by the element test).
bool try_narrow_accumulation(const DiagnosisInput& in, Search& s, const ElementTest& t,
                             const std::vector<std::int64_t>& positions, std::int64_t numel, Hypothesis h,
                             const ElementValue& value, const ops::ElementOptions& opt, double& clean,
                             bool clean_first = false);
// The same over R's op's output elements with `operands`.
bool try_narrow_accumulation(const DiagnosisInput& in, Search& s, const ElementTest& t,
                             const std::vector<std::int64_t>& positions, std::int64_t numel, Hypothesis h,
                             const ElementRecompute& R, const ops::ElementOperands& operands,
                             const ops::ElementOptions& opt, double& clean);

// dL/dy of the MSE loss, 2 (y - t) / N, from the reference's stored output and target as its
// float32 backward forms it: rounded to the case dtype (`rounded`, as a bfloat16/float16 backward
// pass holds it) or kept in float32 (diagnosis_gradient_accumulation.cpp).
std::vector<float> mse_dy(const ArrayView& y, const ArrayView& t, DType logical, bool rounded);

// The options of every sampled recompute: the sum starts at the bias (scaled: 0 lost, 2 doubled),
// as a hand-written `s = b[o]; for ... s += ...` does, in float64 unless `acc` names a narrow
// accumulator, in `order`; a narrow accumulator's adds are float32 adds stored in the narrow type
// (diagnosis_internal.hpp, "Accumulation in a narrow type").
inline ops::ElementOptions recompute_options(double bias_scale = 1.0, Rounding acc = Rounding::none,
                                             ops::SumOrder order = ops::SumOrder::canonical) {
  ops::ElementOptions o;
  o.accumulation = accumulation_of(acc);
  o.order = order;
  o.bias_first = true;
  o.bias_scale = bias_scale;
  o.float32_adds = true;
  return o;
}

// A convolution-like op's parameters from the diagnosis input: sizes from the input (NCHW) and
// weight shapes (kernel in axes 2, 3), geometry from in.conv, the bias when the case has one and
// it is there. The caller sets the output channels and checks the rest. False: no 4-d input and
// weight.
template <class P>
bool conv_like_params(const DiagnosisInput& in, P& p) {
  auto has = [&](const char* n) { return in.inputs.count(n) && in.input_shapes.count(n); };
  if (in.shape.size() != 4 || !has("input") || !has("weight")) return false;
  const Shape &xs = in.input_shapes.at("input"), &ws = in.input_shapes.at("weight");
  if (xs.size() != 4 || ws.size() != 4 || in.conv.groups < 1) return false;
  p.n = xs[0], p.c = xs[1], p.h = xs[2], p.w = xs[3], p.kh = ws[2], p.kw = ws[3];
  for (int a = 0; a < 2; ++a) {
    p.stride[a] = in.conv.stride[a];
    p.padding[a] = in.conv.padding[a];
    p.dilation[a] = in.conv.dilation[a];
  }
  p.groups = in.conv.groups;
  p.bias = in.conv.bias && has("bias");
  return p.stride[0] >= 1 && p.stride[1] >= 1;
}

// A contiguous canonical tensor (a bias) as an element operand.
inline ops::ElementOperand contiguous_operand(const ArrayView& v) {
  ops::ElementOperand e{};
  e.data = v.data;
  e.storage = v.storage;
  e.stride = {1, 0, 0, 0};
  return e;
}

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

// The running sum kept in a narrow type, in every order R's op follows, from the declared operands
// (diagnosis_narrow_accumulation.cpp).
void search_narrow_accumulation(const DiagnosisInput& in, Search& s, const ElementTest& t,
                                const std::vector<std::int64_t>& positions, std::int64_t numel,
                                const ElementRecompute& R, const ops::ElementOperands& declared);

}  // namespace validate::compare::detail
