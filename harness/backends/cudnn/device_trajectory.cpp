#include "device_trajectory.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "device_param.hpp"
#include "validate/train/tensor_names.hpp"

namespace validate::runners::cudnn_detail {

Result<TrainPlan> plan_training(const cases::Case& c, cases::Op op) {
  if (!c.train) return Error{"not a training case"};
  // float32, or bfloat16/float16 in mixed precision; SGD or Adam (device_param.hpp).
  if (auto update = device_update_name(*c.train, c.dtype); !update) return update.status();
  TrainPlan p;
  p.config = *c.train;
  p.checkpoints = train::checkpoint_steps(p.config);
  for (const auto& t : c.parameters(op)) p.params.push_back(t.name);
  if (p.params.empty())
    return Error{fmt::format("{} has no parameter to train", cases::op_name(op))};
  return p;
}

Result<std::map<std::string, Tensor>> run_device_trajectory(const TrainPlan& plan,
                                                            DeviceStepper& stepper) {
  const std::int64_t steps = plan.config.steps;
  if (steps < 1) return Error{fmt::format("a trajectory of {} steps", steps)};
  std::map<std::string, Tensor> out;
  Tensor curve(DType::float32, Shape{steps});
  for (std::int64_t s = 0; s < steps; ++s) {
    auto fail = [s](const std::string& what, const std::string& msg) {
      return Error{fmt::format("training step {}: {}: {}", s, what, msg)};
    };
    if (Status st = stepper.load_step(s); !st) return fail("loading the batch", st.message());
    auto loss = stepper.forward_backward();
    if (!loss) return fail("forward/backward", loss.message());
    if (!std::isfinite(*loss))
      return Error{
          fmt::format("training step {}: the loss is {} (the trajectory diverged)", s, *loss)};
    curve.data<float>()[s] = *loss;
    // The checkpoint holds the parameters this step's forward used: read before the update.
    if (std::binary_search(plan.checkpoints.begin(), plan.checkpoints.end(), s)) {
      auto got = stepper.read_back();
      if (!got) return fail("reading the checkpoint", got.message());
      for (const auto& name : plan.params)
        for (const std::string& t : {name, "grad_" + name}) {
          auto it = got->find(t);
          if (it == got->end()) return fail("reading the checkpoint", "no " + t);
          out.insert_or_assign(train::checkpoint_tensor(s, t), std::move(it->second));
        }
    }
    if (Status st = stepper.update(s == 0); !st) return fail("the optimizer update", st.message());
  }
  out.insert_or_assign(train::kLossCurve, std::move(curve));
  return out;
}

Status check_training_outputs(const cases::Case& c, cases::Op op,
                              const std::map<std::string, Tensor>& outputs) {
  for (const auto& t : c.tensors(op)) {
    if (t.role != cases::Role::loss_curve && t.role != cases::Role::checkpoint) continue;
    const DType want = c.storage(t);
    auto it = outputs.find(t.name);
    if (it == outputs.end()) return Error{fmt::format("the trajectory produced no {}", t.name)};
    if (it->second.shape() != t.shape || it->second.dtype() != want)
      return Error{fmt::format("the trajectory's {} is {} {}, the case expects {} {}", t.name,
                               dtype_name(it->second.dtype()), shape_to_string(it->second.shape()),
                               dtype_name(want), shape_to_string(t.shape))};
  }
  return Status::ok();
}

}  // namespace validate::runners::cudnn_detail
