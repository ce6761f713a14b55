#pragma once
// What the comparison of a training case's loss curve found (docs/training.md "The loss
// curve"): both curves, the relative error and the gate per step, the first step where the
// stacks part and whether that looks like drift or like a mistake (train/trajectory_gate.hpp), and,
// filled in once every entry of the op is known, the first failing checkpoint and its diagnosis.
#include <cstdint>
#include <string>
#include <vector>

namespace validate::compare {

struct TrajectoryStats {
  std::int64_t steps = 0;  // the case's declared step count (the reference curve's length)
  double r0 = 0;           // the single-step relative loss gate (policy loss_rel, role loss_curve)
  std::vector<double> ref, run;  // the two loss curves (run: as long as the run's file)
  std::vector<double> rel_error;  // |run - ref| / |ref| per compared step (NaN for a NaN run loss)
  std::vector<double> gate;       // train::loss_gate(step, r0) per step
  std::string kind = "none";      // "none" (every step within its gate), "drift", "mistake"
  std::int64_t first_bad_step = -1;  // -1: none
  double error = 0;       // relative error at first_bad_step
  double gate_at = 0;     // the gate it exceeded
  double growth = 0;      // error ratio per step after it (1: flat)
  std::string sentence;   // train::Divergence::sentence(), or why the curve could not be compared
  // The first checkpoint tensor (step<k>_<param>, step<k>_grad_<param>) of the op that failed, its
  // step and its diagnosis (code "" when none was named); empty when every checkpoint passed.
  std::string first_bad_checkpoint;
  std::int64_t first_bad_checkpoint_step = -1;
  std::string checkpoint_diagnosis, checkpoint_diagnosis_code;
  std::int64_t checkpoints_failed = 0, checkpoints_compared = 0;
};

}  // namespace validate::compare
