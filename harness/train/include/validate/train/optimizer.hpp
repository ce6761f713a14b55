#pragma once
// The update a training case's optimizer makes (TrainConfig::optimizer), one parameter tensor at a
// time: the one switch over optimizers every host-side trajectory goes through (the loop in
// trajectory.cpp, the exec examples' counterparts follow the same formulas).
#include <cstddef>

#include "validate/train/adam.hpp"
#include "validate/train/schedule.hpp"
#include "validate/train/sgd.hpp"

namespace validate::train {

template <class T>
struct OptimizerState {
  SgdState<T> sgd;
  AdamState<T> adam;
};

template <class T>
void optimizer_step(T* param, const T* grad, std::size_t n, OptimizerState<T>& state, const TrainConfig& c) {
  switch (c.optimizer) {
    case Optimizer::sgd: sgd_step(param, grad, n, state.sgd, c); return;
    case Optimizer::adam: adam_step(param, grad, n, state.adam, c); return;
  }
}

}  // namespace validate::train
