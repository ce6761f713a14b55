#pragma once
// Comparing two loss curves (docs/training.md, "Tolerance"): a gate that grows with the step as
// independent rounding errors do (r0 * sqrt(1 + step)), the first step where the curves part, and
// whether that looks like drift (slow growth: reordering noise that compounds) or like a mistake
// (a jump far above the gate, or geometric growth: a wrong update). Measured basis
// (bench/training/drift.py): clean float32 vs float64 stays within 2.3e-7 relative over 100 SGD
// steps; a dW applied in the filter layout is 2.4e-3 off at step 1 at lr 0.01.
#include <cstdint>
#include <string>
#include <vector>

namespace validate::train {

// The relative loss error allowed at `step` (0-based) for a single-step gate r0.
double loss_gate(std::int64_t step, double r0);

struct Divergence {
  enum class Kind { none, drift, mistake };
  Kind kind = Kind::none;
  std::int64_t first_bad_step = -1;  // -1: every step within its gate
  double error = 0;                   // relative loss error at first_bad_step
  double gate = 0;                    // the gate it exceeded
  double growth = 0;                  // error ratio per step over the steps after it (1 = flat)
  std::string sentence() const;       // "the curves part at step 1: 2.4e-03 against a gate of ..."
};

// A mistake: at the first bad step the error is >= kMistakeFactor x the gate, or it then grows by
// >= kMistakeGrowth per step (geometric, as a wrong update compounds), or it jumped there: >=
// kJumpFactor x the gate and >= kJumpFactor x every error before it (drift creeps up to the gate;
// it cannot leap an order of magnitude past it from a clean step). Anything else past the gate is
// drift. `rel_errors[s]` = |run - ref| / |ref| at step s; a NaN error is a mistake at that step.
// Why 1.4: rounding drift grows like sqrt(1 + s) (1.13x per step from step 1 over the next five)
// and even an error compounding linearly crosses the gate at 1.22x per step at worst; the planted
// dW-layout update compounds at 1.5x - 2.0x per step (mixed-precision trajectories,
// TrajectoryGate.MixedPrecision*, lr 0.01 - 0.2). The growth matters where the jump cannot: a
// bfloat16 gate is 1e-3, and at lr 0.01 the planted update is only 2 - 4x the gate at first.
inline constexpr double kMistakeFactor = 100;
inline constexpr double kMistakeGrowth = 1.4;
// Adam normalizes its steps, so a wrong update's error grows slowly (1.33x per step measured) and at
// bfloat16's gate its first jump is 18x the gate (example.fortran.train_adam): the jump names it.
inline constexpr double kJumpFactor = 10;
Divergence classify_divergence(const std::vector<double>& rel_errors, double r0);

// |run - ref| / |ref| per step (|ref| below 1e-30 counts as 1e-30); the shorter length wins.
std::vector<double> relative_errors(const std::vector<double>& run, const std::vector<double>& ref);

}  // namespace validate::train
