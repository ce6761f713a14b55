#pragma once
// "Loss taken on the unrounded output" as a CHECK, not only a diagnosis. On a bfloat16
// case that mistake moves the loss by ~1e-5..1e-4, inside the default bfloat16 loss gate
// (loss_abs 1e-4) on most cases: a false pass. Tightening the gate would fail honest stacks whose
// bfloat16 outputs round differently from the reference's; instead the loss is held against the
// program's OWN stored output, which every honest stack's loss is the MSE of whatever its
// rounding. The check decides between three losses, all in float64 against the reference target:
//   stored    = MSE of the run's output file (what the program stored, in the case dtype),
//   rounded   = MSE of the float64 output (reference inputs) rounded to the case dtype,
//   unrounded = MSE of that float64 output unrounded.
// The run fails when its loss is at least 4x closer to `unrounded` than to both `stored` and
// `rounded`, and rounding moves the loss by more than 8 float32 units (below that, the float32
// reduction of an honest loss could sit nearer the unrounded one). A loss within 8 float32 units
// of its stored output's MSE or of the reference's loss is not recomputed at all (the passing path
// costs one pass over the output), so only suspicious losses pay the float64 forward pass
// (DiagnosisInput::full_forward_budget, 2^27 multiply-adds; beyond it, no check).
#include <optional>
#include <string>

#include "validate/diagnosis/diagnosis.hpp"

namespace validate::compare {

struct LossRoundingCheck {
  double run = 0, stored = 0, rounded = 0, unrounded = 0;
  // |run - unrounded| / min(|run - stored|, |run - rounded|): below kLimit, the loss was taken on
  // the unrounded output.
  double ratio = 0;
  static constexpr double kLimit = 0.25;
  bool failed = false;
  std::string message;  // the failure, in the program's terms
};

// `in`: role loss, logical dtype, run_loss, the op's reference inputs with "target" (as for the
// loss diagnosis). `run_output`: the run's output tensor (canonical layout). Nothing for float32
// cases (stored = unrounded), when the loss is the stored output's, or when it cannot be decided.
std::optional<LossRoundingCheck> check_loss_rounding(const DiagnosisInput& in,
                                                     const ArrayView& run_output);

}  // namespace validate::compare
