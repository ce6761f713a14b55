// The rounding-bias check of an output held to the error bound (rounding_bias.hpp;
// docs/compare.md, "Rounding bias"): the per-element bound sees each element alone, so a tensor
// stored by truncation, or off by a uniform 0.3% in bfloat16, passes it element by element. Over the
// tensor the bias stands out of the rounding noise.
#include <fmt/format.h>

#include "comparer.hpp"
#include "validate/metrics/rounding_bias.hpp"

namespace validate::compare::detail {

void check_rounding_bias(const Entry& e, const ArrayView& ref, const ArrayView& run, const ArrayView& scale,
                         const BoundOptions& o, GateResult& gr) {
  // Outputs only: a gradient's errors are correlated through dL/dy (one rounded dL/dy element moves a
  // whole row of grad_A, every channel of grad_input at its positions), so the standard error of
  // independent elements understates its noise: the float64 oracle's bfloat16 grad_A of the smoke
  // set leans 4.3 such standard errors, with no mistake in it.
  if (e.role != ops::Role::output) return;
  // What correct stacks may share, and what a correct in-order sum of same-sign terms may lean on
  // its own (accumulation_bias: positive operands spanning 8 decades lean 3e-6 toward zero at n = 4608).
  const double allowed = allowed_bias(o) + accumulation_bias(ref, scale, o);
  const RoundingBias b = rounding_bias(ref, run, allowed);
  if (b.elements < 2) return;
  gr.checks.push_back(Check{"rounding_bias", b.z, kRoundingBiasZ, true, !b.biased()});
  if (!b.biased()) return;
  gr.reasons.push_back(fmt::format(
      "the errors lean {} zero over the tensor: a relative bias of {:.3g} (+- {:.2g}; {} of {} elements toward zero, "
      "{} away), {:.0f} standard errors beyond the {:.2g} correct stacks may share; each element may be within "
      "its own bound — a biased rounding (truncation) or a scale factor rounded in a narrow type",
      b.relative < 0 ? "toward" : "away from", b.relative, b.se, b.toward_zero, b.elements, b.away_from_zero, b.z,
      allowed));
}

}  // namespace validate::compare::detail
