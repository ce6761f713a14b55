#pragma once
// One SGD update as torch.optim.SGD computes it (PyTorch 1.13 and 2.x, the foreach and the
// for-loop paths agree element by element):
//   g = grad + weight_decay * p
//   b = g                                  on the first step with momentum
//   b = momentum * b + (1 - dampening) * g after it
//   g = g + momentum * b  (Nesterov)  or  g = b
//   p = p - lr * g
// in the parameter's dtype, each operation rounded (PyTorch's `add(x, alpha=a)` may fuse a*x + y
// into one rounding: the two agree within an ulp per step, far inside the trajectory gate). The
// float64 oracle runs it in float64. The traps it guards against: an update written as
// p -= lr * (momentum * b + g) without keeping b, or weight decay applied after the momentum. Both
// make the same first update (the buffer starts as g), so step1_<param> agrees and they part from
// PyTorch at step 2: only the trajectory (the loss curve, later checkpoints) shows them.
#include <cstddef>
#include <vector>

#include "validate/train/schedule.hpp"

namespace validate::train {

// The optimizer state of one parameter tensor: its momentum buffer (empty until the first step).
template <class T>
struct SgdState {
  std::vector<T> momentum;
};

template <class T>
void sgd_step(T* param, const T* grad, std::size_t n, SgdState<T>& state, const TrainConfig& c) {
  const T lr = static_cast<T>(c.lr), mu = static_cast<T>(c.momentum), wd = static_cast<T>(c.weight_decay);
  const T keep = static_cast<T>(1.0 - c.dampening);
  const bool first = state.momentum.empty();
  if (c.momentum != 0 && first) state.momentum.assign(n, T(0));
  for (std::size_t i = 0; i < n; ++i) {
    T g = grad[i];
    if (c.weight_decay != 0) g = static_cast<T>(g + static_cast<T>(wd * param[i]));
    if (c.momentum != 0) {
      T& b = state.momentum[i];
      b = first ? g : static_cast<T>(static_cast<T>(mu * b) + static_cast<T>(keep * g));
      g = c.nesterov ? static_cast<T>(g + static_cast<T>(mu * b)) : b;
    }
    param[i] = static_cast<T>(param[i] - static_cast<T>(lr * g));
  }
}

}  // namespace validate::train
