#pragma once
// One Adam update as torch.optim.Adam computes it (L2 weight decay added to the gradient, not
// AdamW's decoupled decay; no AMSGrad), per element, in the parameter's dtype T with each operation
// rounded:
//   g = grad + weight_decay * p
//   m = beta1 * m + (1 - beta1) * g            v = beta2 * v + (1 - beta2) * g * g
//   p = p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)      t = 1, 2, ...
// The bias corrections are computed in double once per step (LibTorch does the same on the host),
// then rounded to T. The trap it guards against: bias correction applied to m and v in place (it
// compounds from step to step), eps added inside the square root, or t counted from 0 — each
// agrees with PyTorch at the first update or the first few and parts from it after.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "validate/train/schedule.hpp"

namespace validate::train {

// The optimizer state of one parameter tensor: both moments (empty until the first step) and the
// step count t.
template <class T>
struct AdamState {
  std::vector<T> m, v;
  std::int64_t step = 0;
};

template <class T>
void adam_step(T* param, const T* grad, std::size_t n, AdamState<T>& state, const TrainConfig& c) {
  if (state.m.empty()) {
    state.m.assign(n, T(0));
    state.v.assign(n, T(0));
  }
  ++state.step;
  const double t = static_cast<double>(state.step);
  const T b1 = static_cast<T>(c.beta1), b2 = static_cast<T>(c.beta2);
  const T k1 = static_cast<T>(1.0 - c.beta1), k2 = static_cast<T>(1.0 - c.beta2);
  const T wd = static_cast<T>(c.weight_decay), eps = static_cast<T>(c.eps);
  const T step_size = static_cast<T>(c.lr / (1.0 - std::pow(c.beta1, t)));
  const T bc2_sqrt = static_cast<T>(std::sqrt(1.0 - std::pow(c.beta2, t)));
  for (std::size_t i = 0; i < n; ++i) {
    T g = grad[i];
    if (c.weight_decay != 0) g = static_cast<T>(g + static_cast<T>(wd * param[i]));
    T& m = state.m[i];
    T& v = state.v[i];
    m = static_cast<T>(static_cast<T>(b1 * m) + static_cast<T>(k1 * g));
    v = static_cast<T>(static_cast<T>(b2 * v) + static_cast<T>(static_cast<T>(k2 * g) * g));
    const T denom = static_cast<T>(static_cast<T>(std::sqrt(v) / bc2_sqrt) + eps);
    param[i] = static_cast<T>(param[i] - static_cast<T>(step_size * static_cast<T>(m / denom)));
  }
}

}  // namespace validate::train
