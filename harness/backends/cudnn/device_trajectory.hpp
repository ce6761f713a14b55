#pragma once
// The bookkeeping of a training trajectory run on the device (docs/training.md, docs/cudnn.md),
// apart from any CUDA: which steps are checkpoints, what is read back at each, the loss curve, and
// the names the case's tensor table expects. The op-specific device work (upload a step's batch,
// forward + loss + backward, read the parameters and gradients, the optimizer update in the
// stack's own layouts) is behind DeviceStepper, so this loop is tested on the CPU with a host
// stepper against train::run_trajectory — the loop every stack is held to.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "validate/cases/case.hpp"
#include "validate/core/result.hpp"
#include "validate/core/tensor.hpp"
#include "validate/train/schedule.hpp"

namespace validate::runners::cudnn_detail {

// What a training case asks of one op, checked before anything runs.
struct TrainPlan {
  train::TrainConfig config;
  std::vector<std::int64_t> checkpoints;  // ascending (train::checkpoint_steps)
  std::vector<std::string> params;        // the op's parameters in table order: weight, bias / B
};

// Errors (the runner reports them as `unsupported`): a case that does not train, a dtype other
// than float32 (training cases are float32 only), an optimizer other than SGD, an op with no
// parameter.
Result<TrainPlan> plan_training(const cases::Case& c, cases::Op op);

// The device side of one step. Implementations keep every tensor in the stack's own layouts
// between steps; only what the loop asks for is converted back.
class DeviceStepper {
 public:
  virtual ~DeviceStepper() = default;
  // Puts step s's batch in place: step 0 the reference's own inputs, and the initial parameters
  // with a fresh optimizer state; s >= 1 only the data inputs (the parameters are the updated
  // ones).
  virtual Status load_step(std::int64_t step) = 0;
  // Forward, loss and backward at the current parameters; returns the loss.
  virtual Result<float> forward_backward() = 0;
  // The current parameters and their gradients, canonical, storage dtype, named as the op's table
  // names them ("weight", "grad_weight", ...).
  virtual Result<std::map<std::string, Tensor>> read_back() = 0;
  // The SGD update of every parameter from its gradient; `first_step` starts the momentum buffers.
  virtual Status update(bool first_step) = 0;
};

// A stepper made of four functions (matmul's device state is local to run_matmul; tests).
struct FunctionStepper final : DeviceStepper {
  std::function<Status(std::int64_t)> load;
  std::function<Result<float>()> pass;
  std::function<Result<std::map<std::string, Tensor>>()> read;
  std::function<Status(bool)> step;
  Status load_step(std::int64_t s) override { return load(s); }
  Result<float> forward_backward() override { return pass(); }
  Result<std::map<std::string, Tensor>> read_back() override { return read(); }
  Status update(bool first_step) override { return step(first_step); }
};

// Runs plan.config.steps steps: load, forward/backward, the loss into train_loss, at a checkpoint
// step the parameters that step used and its gradients (read before the update), then the update.
// Returns train_loss and every step<k>_<tensor>. Errors name the step; a non-finite loss is an
// error (the trajectory diverged), as in train::run_trajectory.
Result<std::map<std::string, Tensor>> run_device_trajectory(const TrainPlan& plan,
                                                            DeviceStepper& stepper);

// Every loss-curve and checkpoint tensor the case's table lists for `op` is in `outputs` with the
// table's shape and dtype; else an error naming the first one that is not. A trajectory that
// skipped a tensor must fail here, never reach compare as a quiet "not produced".
Status check_training_outputs(const cases::Case& c, cases::Op op,
                              const std::map<std::string, Tensor>& outputs);

}  // namespace validate::runners::cudnn_detail
