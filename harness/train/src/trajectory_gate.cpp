#include "validate/train/trajectory_gate.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace validate::train {

double loss_gate(std::int64_t step, double r0) { return r0 * std::sqrt(1.0 + static_cast<double>(std::max<std::int64_t>(step, 0))); }

std::vector<double> relative_errors(const std::vector<double>& run, const std::vector<double>& ref) {
  const std::size_t n = std::min(run.size(), ref.size());
  std::vector<double> e(n);
  for (std::size_t i = 0; i < n; ++i) e[i] = std::fabs(run[i] - ref[i]) / std::max(std::fabs(ref[i]), 1e-30);
  return e;
}

Divergence classify_divergence(const std::vector<double>& rel_errors, double r0) {
  Divergence d;
  double before = 0;  // the largest error of the steps before
  for (std::size_t s = 0; s < rel_errors.size(); ++s) {
    const double e = rel_errors[s];
    const double gate = loss_gate(static_cast<std::int64_t>(s), r0);
    if (!std::isnan(e) && e <= gate) {
      before = std::max(before, e);
      continue;  // NaN never passes
    }
    d.first_bad_step = static_cast<std::int64_t>(s);
    d.error = e;
    d.gate = gate;
    // Growth per step: geometric mean of the ratio over up to the next 5 steps.
    const std::size_t last = std::min(rel_errors.size() - 1, s + 5);
    d.growth = 1;
    if (last > s && e > 0 && std::isfinite(e) && std::isfinite(rel_errors[last]) && rel_errors[last] > 0)
      d.growth = std::pow(rel_errors[last] / e, 1.0 / static_cast<double>(last - s));
    const bool jump = e >= kJumpFactor * gate && e >= kJumpFactor * before;
    const bool mistake =
        std::isnan(e) || !std::isfinite(e) || e >= kMistakeFactor * gate || d.growth >= kMistakeGrowth || jump;
    d.kind = mistake ? Divergence::Kind::mistake : Divergence::Kind::drift;
    return d;
  }
  return d;
}

std::string Divergence::sentence() const {
  if (kind == Kind::none) return "the loss curves agree at every step within the gate";
  // Step 0 is the single-step check: no update has happened yet, so the optimizer is not the
  // suspect (TF32 or a wrong layout in the forward shows here first, and the step-0 entries say which).
  const char* what = first_bad_step == 0
                         ? "they differ before any update: the forward, the loss or the gradients of step 0 differ (the "
                           "step-0 entries say how), not the optimizer"
                     : kind == Kind::mistake
                         ? "a mistake, not drift: check the update of the parameters (a gradient applied in another layout, "
                           "a missing momentum buffer, weight decay in the wrong place)"
                         // Not "harmless": clean stacks stay far inside the gate (float32 at most 48% of
                         // it, mixed precision 16%), and a learning rate 3% off, a stale gradient or a
                         // momentum buffer reset each step crossed it this slowly in bfloat16.
                         : "drift: the error grows slowly, as accumulated rounding would, but past the gate that "
                           "clean stacks stay well inside: check the optimizer's settings and state (learning "
                           "rate, weight decay, momentum buffer, which step's gradient) and the arithmetic's precision";
  return fmt::format("the loss curves part at step {}: relative error {:.2e} against a gate of {:.2e}, growing {:.3g}x per step; {}",
                     first_bad_step, error, gate, growth, what);
}

}  // namespace validate::train
