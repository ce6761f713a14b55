// Input side, every op with an element path: the running sum kept in a narrow type (float32,
// bfloat16, float16 accumulators), in each order the op follows (OpDef::sum_orders: conv2d's two
// loop nests, matmul's k). A hypothesis names it only when it reproduces the run AND leaves at most
// 1/kNarrowFactor of the clean float64 recompute's residual (diagnosis_internal.hpp): a narrow sum
// of a short reduction is close to the exact one, and must not be named where float64 fits as well.
#include "diagnosis_internal.hpp"
#include "diagnosis_operand.hpp"

namespace validate::compare::detail {

namespace {
double clean_residual(const DiagnosisInput& in, const ElementTest& t, const std::vector<std::int64_t>& positions,
                      const ElementValue& value) {
  Eval c;
  const ops::ElementOptions exact = recompute_options();
  for (std::int64_t p : positions) c.add(round_to_logical(value(p, exact), in.logical), read_value(in.run, p), t);
  return c.max_abs;
}
}  // namespace

bool try_narrow_accumulation(const DiagnosisInput& in, Search& s, const ElementTest& t,
                             const std::vector<std::int64_t>& positions, std::int64_t numel, Hypothesis h,
                             const ElementValue& value, const ops::ElementOptions& opt, double& clean,
                             bool clean_first) {
  Eval e;
  if (clean_first) {
    // The clean residual first: a position whose residual is over kNarrowFactor times less than
    // it rules the hypothesis out, so the sum stops there (a wrong order or format of a long
    // reduction is off by far more than that on its first positions).
    if (clean < 0) clean = clean_residual(in, t, positions, value);
    for (std::int64_t p : positions) {
      e.add(round_to_logical(value(p, opt), in.logical), read_value(in.run, p), t);
      if ((e.beyond > 0 && e.checked >= 4) || e.max_abs * kNarrowFactor > clean) break;
    }
  } else {
    e = eval_recompute(in, t, positions, [&](std::int64_t p) { return value(p, opt); });
  }
  finish_recompute(h, e, numel);
  if (h.passes && e.checked < static_cast<std::int64_t>(positions.size())) h.passes = false;  // stopped early
  if (h.passes) {
    if (clean < 0) clean = clean_residual(in, t, positions, value);
    h.params["clean_residual"] = clean;
    h.passes = h.max_abs * kNarrowFactor <= clean;
  }
  const bool named = h.passes;
  s.add(std::move(h));
  return named;
}

bool try_narrow_accumulation(const DiagnosisInput& in, Search& s, const ElementTest& t,
                             const std::vector<std::int64_t>& positions, std::int64_t numel, Hypothesis h,
                             const ElementRecompute& R, const ops::ElementOperands& operands,
                             const ops::ElementOptions& opt, double& clean) {
  return try_narrow_accumulation(
      in, s, t, positions, numel, std::move(h),
      [&](std::int64_t p, const ops::ElementOptions& o) { return R.at(p, operands, o); }, opt, clean);
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
