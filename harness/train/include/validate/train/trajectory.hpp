#pragma once
// Running N optimizer steps of one op (docs/training.md): the loop every stack that trains is
// checked against. The op is behind a step function (forward, loss, backward for the given
// parameters and that step's inputs), so the loop knows no op; the float64 oracle plugs the op
// registry's reference in, a test plugs in a model whose answer is known in closed form.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "validate/core/result.hpp"
#include "validate/core/rng.hpp"
#include "validate/train/schedule.hpp"

namespace validate::train {

template <class T>
using Tensors = std::map<std::string, std::vector<T>>;  // by the op's tensor names ("weight", "bias")

template <class T>
struct StepOutcome {
  double loss = 0;
  Tensors<T> grads;  // "grad_weight", "grad_bias": one per parameter, "grad_" + its name
};

// Forward, loss and backward of `step` (which draws that step's inputs) at `params`.
template <class T>
using StepFunction = std::function<Result<StepOutcome<T>>(std::int64_t step, const Tensors<T>& params)>;

// Checkpoint k: the parameters step k's forward used and the gradients it produced. Step 0's is
// therefore exactly the single-step check of today (the reference's inputs and gradients).
template <class T>
struct Checkpoint {
  std::int64_t step = 0;
  Tensors<T> params, grads;
};

template <class T>
struct Trajectory {
  std::vector<double> losses;  // one per step
  std::vector<Checkpoint<T>> checkpoints;
  Tensors<T> final_params;     // after the last update
};

// Runs c.steps steps from `params`, updating every parameter with the case's optimizer
// (optimizer.hpp: SGD or Adam) in T. Errors: the
// step function's (prefixed with the step), a gradient missing or of another size than its
// parameter, a non-finite loss (a trajectory that blew up says at which step).
template <class T>
Result<Trajectory<T>> run_trajectory(const TrainConfig& c, Tensors<T> params, const StepFunction<T>& step_fn);

// The random stream of a tensor at a step: step 0 is the single-step case's own stream (`base`),
// so a one-step trajectory draws exactly today's inputs; step s > 0 is keyed by the base key and s.
Philox step_stream(const Philox& base, std::int64_t step);

extern template Result<Trajectory<double>> run_trajectory(const TrainConfig&, Tensors<double>, const StepFunction<double>&);
extern template Result<Trajectory<float>> run_trajectory(const TrainConfig&, Tensors<float>, const StepFunction<float>&);

}  // namespace validate::train
