// Input side, every op with an element path: the running sum kept in a narrow type (float32,
// bfloat16, float16 accumulators), in each order the op follows (OpDef::sum_orders: conv2d's two
// loop nests, matmul's k). A hypothesis names it only when it reproduces the run AND leaves at most
// 1/kNarrowFactor of the clean float64 recompute's residual (diagnosis_internal.hpp): a narrow sum
// of a short reduction is close to the exact one, and must not be named where float64 fits as well.
#include "diagnosis_internal.hpp"
#include "diagnosis_operand.hpp"

namespace validate::compare::detail {

bool try_narrow_accumulation(const DiagnosisInput& in, Search& s, const ElementTest& t,
                             const std::vector<std::int64_t>& positions, std::int64_t numel, Hypothesis h,
                             const ElementRecompute& R, const ops::ElementOperands& operands,
                             const ops::ElementOptions& opt, double& clean) {
  const Eval e = eval_recompute(in, t, positions, [&](std::int64_t p) { return R.at(p, operands, opt); });
  finish_recompute(h, e, numel);
  if (h.passes) {
    if (clean < 0) {
      Eval c;
      for (std::int64_t p : positions)
        c.add(round_to_logical(R.at(p, operands, recompute_options()), in.logical), read_value(in.run, p), t);
      clean = c.max_abs;
    }
    h.params["clean_residual"] = clean;
    h.passes = h.max_abs * kNarrowFactor <= clean;
  }
  const bool named = h.passes;
  s.add(std::move(h));
  return named;
}

void search_narrow_accumulation(const DiagnosisInput& in, Search& s, const ElementTest& t,
                                const std::vector<std::int64_t>& positions, std::int64_t numel,
                                const ElementRecompute& R, const ops::ElementOperands& declared) {
  double clean = -1;  // residual of the clean recompute, computed when first needed
  const auto orders = R.def->sum_orders();
  for (Rounding acc : accumulators_to_try(in.logical))
    for (const auto& order : orders)
      try_narrow_accumulation(in, s, t, positions, numel,
                              narrow_accumulation_hypothesis(acc, "output", order.name, order.words), R, declared,
                              recompute_options(1.0, acc, order.order), clean);
}

}  // namespace validate::compare::detail
