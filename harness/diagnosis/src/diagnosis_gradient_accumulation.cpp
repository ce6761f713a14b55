// Gradient side, matmul: the backward GEMM's running sum kept in a narrow type (conv2d's and
// conv_transpose2d's gradients: diagnosis_conv_gradient_accumulation.cpp). grad_A = dL/dy B^T
// and grad_B = A^T dL/dy are matmuls themselves, so matmul's own per-element sum recomputes them
// (OpDef::output_element) with dL/dy = 2 (y - t) / N from the reference's stored output and target,
// rounded to the case dtype as a bfloat16/float16 backward pass holds it, or kept in float32. As
// for an output (diagnosis_narrow_accumulation.cpp), a narrow accumulator is named only when it
// reproduces the run AND leaves at most 1/kNarrowFactor of the clean float64 recompute's residual.
#include <vector>

#include "diagnosis_internal.hpp"
#include "diagnosis_operand.hpp"

namespace validate::compare::detail {

std::vector<float> mse_dy(const ArrayView& y, const ArrayView& t, DType logical, bool rounded) {
  std::vector<float> dy(static_cast<std::size_t>(y.numel));
  const float scale = 2.0f / static_cast<float>(y.numel);
  for (std::int64_t i = 0; i < y.numel; ++i) {
    const float d = (static_cast<float>(read_value(y, i)) - static_cast<float>(read_value(t, i))) * scale;
    dy[static_cast<std::size_t>(i)] = rounded ? round_to_logical(d, logical) : d;
  }
  return dy;
}

namespace {

ArrayView float_view(const std::vector<float>& v) {
  return ArrayView{reinterpret_cast<const std::byte*>(v.data()), DType::float32, static_cast<std::int64_t>(v.size())};
}

}  // namespace

void search_gradient_accumulation(const DiagnosisInput& in, Search& s) {
  if (in.op == ops::Op::conv2d || in.op == ops::Op::conv_transpose2d) return search_conv_gradient_accumulation(in, s);
  if (in.op != ops::Op::matmul || in.role != ops::Role::grad || in.run_shape != in.shape) return;
  if (in.tensor != "grad_A" && in.tensor != "grad_B") return;
  if (in.logical != DType::bfloat16 && in.logical != DType::float16) return;  // accumulators_to_try
  for (const char* n : {"A", "B", "output", "target"})
    if (!in.inputs.count(n) || !in.input_shapes.count(n)) return;
  const Shape as = in.input_shapes.at("A"), bs = in.input_shapes.at("B"), ys = in.input_shapes.at("output");
  if (as.size() != 2 || bs.size() != 2 || ys.size() != 2 || as[1] != bs[0] || ys[0] != as[0] || ys[1] != bs[1] ||
      in.input_shapes.at("target") != ys)
    return;
  const std::int64_t m = as[0], k = as[1], n = bs[1];
  const bool grad_a = in.tensor == "grad_A";
  if (in.shape != (grad_a ? Shape{m, k} : Shape{k, n})) return;
  s.family("numeric");
  // grad_A[m,k] = sum_n dy[m,n] B[k,n]: a matmul of dy [M,N] and B's bytes read as [N,K];
  // grad_B[k,n] = sum_m A[m,k] dy[m,n]: of A's bytes read as [K,M] and dy [M,N].
  const ElementRecompute R(ops::Op::matmul, grad_a ? ops::MatmulParams{m, n, k} : ops::MatmulParams{k, m, n});
  const layout::Placement dy_read = layout::placement(Shape{m, n}, {0, 1}, {false, false});
  const layout::Placement other_read = grad_a ? layout::placement(Shape{n, k}, {1, 0}, {false, false})
                                              : layout::placement(Shape{k, m}, {1, 0}, {false, false});
  const ArrayView other = in.inputs.at(grad_a ? "B" : "A");
  const std::int64_t numel = shape_numel(in.shape);
  const ElementTest t = recompute_test(in);
  const auto positions = sample_positions(numel, in.recompute_sample);
  const char* sum_over = grad_a ? "summed over n in order, dL/dy times B" : "summed over m in order, A times dL/dy";
  for (bool rounded : {true, false}) {  // the kept route only where the rounded one names nothing
    const std::vector<float> dy = mse_dy(in.inputs.at("output"), in.inputs.at("target"), in.logical, rounded);
    const Operand d{float_view(dy), dy_read}, o{other, other_read};
    const ops::ElementOperands operands = grad_a ? R.with("A", d, "B", o) : R.with("A", o, "B", d);
    double clean = -1;  // residual of the clean recompute, computed when first needed
    bool named = false;
    for (Rounding acc : accumulators_to_try(in.logical)) {
      Hypothesis h = narrow_accumulation_hypothesis(acc, in.tensor, grad_a ? "n" : "m", sum_over);
      h.params["dy"] = rounded ? "rounded to the case dtype" : "float32";
      named |= try_narrow_accumulation(in, s, t, positions, numel, std::move(h), R, operands,
                                       recompute_options(1.0, acc), clean);
    }
    if (named) return;
  }
}

}  // namespace validate::compare::detail
