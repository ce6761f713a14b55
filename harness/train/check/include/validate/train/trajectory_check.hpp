#pragma once
// The tensors of a training case (docs/training.md, "How compare checks a
// trajectory") need their own reading; an element-wise gate on them would be wrong twice over:
//  - train_loss (Role::loss_curve) is a curve, not a tensor: per-step relative errors against a
//    gate that grows with the step (train::loss_gate, r0 = the policy's loss_rel for role
//    loss_curve), the first step where the stacks part, drift or mistake. With no loss_rel the
//    curve fails (a curve without a gate must not pass), as does a curve of the wrong length or
//    with a non-finite loss.
//  - step<k>_<param> / step<k>_grad_<param> (Role::checkpoint) are compared element-wise, but the
//    tolerance (atol, rtol, max_ulp) grows like the loss gate, times sqrt(1 + k); and a failing
//    parameter checkpoint is diagnosed through its UPDATE, step<k> - step<j> against the
//    reference's, because that is where "update applied with dW in the filter layout" shows.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "validate/cases/refset.hpp"
#include "validate/cases/run_record.hpp"
#include "validate/compare/comparison.hpp"

namespace validate::compare {

// Compares a loss curve: fills e.trajectory, e.checks, e.loss (the worst step, for tables),
// e.verdict and e.message. `ref`/`run` hold the two curves (`run_shape` as the run's file has it),
// `steps` the case's step count. Returns a message when the REFERENCE is unusable (a NaN or a
// length other than `steps`): the caller marks the entry invalid.
std::optional<std::string> check_loss_curve(const ArrayView& ref, const ArrayView& run,
                                            const Shape& run_shape, std::int64_t steps,
                                            const Gates& gates, Entry& e);

// sqrt(1 + k) for a checkpoint tensor of step k, 1 for any other name.
double checkpoint_tolerance_factor(const std::string& tensor);
// The gates of a checkpoint tensor: atol, rtol and max_ulp times checkpoint_tolerance_factor.
Gates checkpoint_gates(Gates g, const std::string& tensor);

struct CheckpointDiagnosisInput {
  const cases::RefCase* ref = nullptr;
  cases::Op op = cases::Op::conv2d;
  std::string tensor;            // step<k>_<param> or step<k>_grad_<param>
  std::string run_dir;           // the directory of the run's tensor files for this case's dtype
  const cases::OpRunRecord* run = nullptr;  // what the run produced and declared
  Gates gates;                   // the (scaled) gates of the failing tensor
  int threads = 0;
};
// step1_<param>: the first update, step1 - step0, run against reference, element by element. Both
// sides start step 0 from the reference's own parameters, so the update is where a wrong update
// shows in full; the parameter itself is mostly its initial value and understates it (at lr 1e-4 a
// dW applied in KRSC moves step1_weight by ~1e-4 relative — inside its rtol — but its update by
// O(1)). An element passes when |du_run - du_ref| <= rtol * max(|du_ref|, floor) + 4 float32 ULP
// of the parameter (both sides store a rounded parameter), floor = near_zero * max|du_ref|; rtol
// is the checkpoint's (atol when no rtol). Nothing for other tensors, without step0_<param> in the
// run, or without an rtol/atol gate. Later updates are not checked this way: once the parameters
// drift apart, the updates are taken at different points and differ by more than rounding.
struct UpdateCheck {
  Check check;         // update_beyond_tolerance: elements beyond, limit 0
  std::string reason;  // the failure, for the entry's message
};
std::optional<UpdateCheck> check_first_update(const CheckpointDiagnosisInput& in);

// step<k>_<param>, k >= 1, of a bfloat16/float16 case: mixed precision keeps float32 masters
// (docs/training.md), so a master the reference moved off the case dtype's grid is off it in a
// correct run too (a float32 lands on the bfloat16 grid by chance with probability 2^-16). A run
// with more than half of those elements on the grid keeps its master in the case dtype — the
// "pure bfloat16" optimizer, which loses every update below half an ULP of the parameter and
// whose loss curve and later checkpoints stay inside their gates (docs/training.md). Check
// master_on_case_dtype_grid (the fraction, limit 0.5) and, when it fails, its diagnosis
// (code narrow_master). Nothing with fewer than kMasterGridMinElements such elements.
inline constexpr std::int64_t kMasterGridMinElements = 4;
inline constexpr double kMasterGridMaxFraction = 0.5;
struct CheckpointCheck {
  Check check;
  std::string reason;                  // the failure, for the entry's message
  std::optional<Diagnosis> diagnosis;  // what it names, when it does
};
std::optional<CheckpointCheck> check_master_precision(const CheckpointDiagnosisInput& in);

// step1_<param> and step2_<param> of an SGD case whose run has the parameters and gradients of the
// steps before: the case's SGD updates (train::sgd_step in float32) replayed on the run's OWN
// parameters and gradients must give the run's parameter, within 4 float32 ULP of the largest
// operand plus what rounding the gradients to the case dtype moves it by (a stack may hand its
// optimizer the unrounded gradient). Step 1 judges the first update; step 2 the first one that
// reads the momentum buffer (built from step 0 as the case builds it). Against the reference the
// updates carry the gradients' difference (bfloat16: 5.7% of the update at step 1), which hid a
// missing weight decay, a 3% learning rate, dampening on the first step and weight decay applied
// after the momentum; against the run's own gradients none of that blurs them. Checks
// own_first_update_beyond_tolerance / own_second_update_beyond_tolerance (elements, limit 0).
// Diagnosis optimizer_settings: at step 1, when w0 − w1 = a·g + b·w0 fits every element, the
// weight decay and the settings that give a (sgd_settings.hpp: with Nesterov a = lr·(1 + momentum),
// so a learning rate and a momentum fit equally; every such candidate is named, and the run's
// step 2, when it has one, decides between them, else the diagnosis is ambiguous and says what
// would); at step 2, the variant that fits every element: weight decay added after the momentum,
// momentum missing (momentum_missing), the update applying the sum of the gradients so far (code
// gradients_accumulated: no zero_grad, each step's own gradient written out), or else the settings
// its two coefficients give (second_update_settings: learning rate, momentum, dampening, weight
// decay; a learning rate changed from step 2 on named beside them where it fits equally). Not for
// Adam: its first update is
// nearly lr·sign(g), and variants users port legitimately (eps before the bias correction, as
// Keras places it) move it by more than rounding where |g| nears eps.
std::optional<CheckpointCheck> check_own_update(const CheckpointDiagnosisInput& in);

// step<k>_grad_<param>, k >= 1, that failed its gate, with the run's step<k-1>_grad_<param>: when
// the run's gradient minus its previous one is the reference's gradient on every element (the
// tensor's rtol, at least 1e-3, of the reference, plus the case dtype's rounding of both run
// gradients and 4 float32 ULP), the gradients were accumulated across steps — a missing
// zero_grad — named gradients_accumulated. At step 1 the run's parameters are still the
// reference's (the first update applied step 0's gradient alone), so the test is exact up to
// rounding; later steps compare gradients of parted trajectories and follow from step 1.
std::optional<Diagnosis> diagnose_accumulated_gradient(const CheckpointDiagnosisInput& in);

// step<k>_<param> with an earlier checkpoint j in both sets: the update step<k> - step<j> of the
// run against the reference's, on the parameter's canonical axes; a layout reading that explains
// it is named "update applied with d<param> in <layout> layout" (code update_layout). Without an
// earlier checkpoint (k = 0), the tensor itself. step<k>_grad_<param>: like the gradient
// grad_<param> (its output-side layouts, the cuDNN filter descriptor's among them). Nothing when
// the tensors cannot be read.
std::optional<Diagnosis> diagnose_checkpoint(const CheckpointDiagnosisInput& in);

// Once every entry is decided: each loss-curve entry learns the first failing checkpoint of its op
// and that checkpoint's diagnosis; a training op whose run returned no trajectory (train_loss not
// run / not requested) gets a warning, since only its step 0 was then checked.
void refine_trajectories(std::vector<Entry>& entries, std::vector<std::string>& warnings);

}  // namespace validate::compare
