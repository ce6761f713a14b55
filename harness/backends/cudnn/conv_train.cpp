// conv2d and conv_transpose2d training trajectory on the device (docs/cudnn.md, "Training cases").
// The tensors stay in the layouts cuDNN is handed for the whole trajectory, as they would in a
// program that trains with cuDNN: each step uploads only its batch (input, target), and the update
// runs on the filter buffer with dW exactly as cudnnConvolutionBackwardFilter wrote it — the same
// memory layout, checked, never assumed. Only the loss (every step) and the checkpoints come back.
#include <chrono>
#include <exception>

#include <fmt/format.h>

#include "conv_case.hpp"

namespace validate::runners::cudnn_detail {

namespace {

class ConvStepper final : public DeviceStepper {
 public:
  ConvStepper(ConvCase& cc, const OpTask& task, const Combo& combo, const train::TrainConfig& c)
      : cc_(cc), task_(task), combo_(combo), c_(c) {}

  Status load_step(std::int64_t step) override {
    if (step == 0) {
      // The reference's own inputs and initial parameters: a trajectory (one per --algo variant)
      // always starts from them, whatever ran before on these buffers.
      for (const char* name : {"input", "target", "weight", "bias"}) {
        auto it = task_.inputs.find(name);
        if (it != task_.inputs.end()) VALIDATE_TRY(cc_.reload(name, *it->second));
      }
      return Status::ok();
    }
    if (!task_.step_inputs)
      return Error{"no batches for steps >= 1 (OpTask::step_inputs is not set)"};
    std::map<std::string, Tensor> batch;
    try {
      batch = task_.step_inputs(step);
    } catch (const std::exception& e) {
      return Error{std::string("drawing the batch: ") + e.what()};
    }
    for (const char* name : {"input", "target"}) {
      auto it = batch.find(name);
      if (it == batch.end()) return Error{fmt::format("the step's batch has no {}", name)};
      VALIDATE_TRY(cc_.reload(name, it->second));
    }
    return Status::ok();
  }

  Result<float> forward_backward() override {
    VALIDATE_TRY(cc_.pass(combo_, nullptr));
    return cc_.loss_value();
  }

  Result<std::map<std::string, Tensor>> read_back() override { return cc_.read_parameters(); }

  Status update(bool) override { return cc_.update(c_); }

 private:
  ConvCase& cc_;
  const OpTask& task_;
  const Combo& combo_;
  const train::TrainConfig& c_;
};

}  // namespace

Status ConvCase::reload(const std::string& name, const Tensor& host) {
  if (name == "weight") return w_opt_.start(w_buf_, host, name);
  if (name == "bias" && g_.bias) return b_opt_.start(b_, host, name);
  DeviceTensor* dst = name == "input" ? &x_ : name == "target" ? &t_buf_ : nullptr;
  if (!dst) return Error{"no device tensor '" + name + "' to load"};
  return reupload(*dst, host, name);
}

Result<float> ConvCase::loss_value() const {
  float v = 0;
  VALIDATE_TRY(loss_.download(&v, sizeof v));
  return v;
}

Result<std::map<std::string, Tensor>> ConvCase::read_parameters() {
  const DType storage = storage_dtype(dt_);
  std::map<std::string, Tensor> out;
  auto w = w_opt_.read(w_buf_, storage);
  if (!w) return with_context("weight", w.message());
  out.emplace("weight", std::move(*w));
  auto dw = grad_weight_as_declared();
  if (!dw) return with_context("grad_weight", dw.message());
  out.emplace("grad_weight", std::move(*dw));
  if (g_.bias) {
    auto b = b_opt_.read(b_, storage);
    if (!b) return with_context("bias", b.message());
    out.emplace("bias", std::move(*b));
    auto db = download(db_, db_.spec, storage);
    if (!db) return with_context("grad_bias", db.message());
    out.emplace("grad_bias", std::move(*db));
  }
  return out;
}

Status ConvCase::update(const train::TrainConfig& c) {
  // The whole point: the update combines the filter buffer and cuDNN's dW element by element, so
  // both must be one layout (KRSC with KRSC, KCRS with KCRS, the same flip). A mismatch is the
  // mistake the trajectory exists to catch, in the runner itself: refuse rather than commit it.
  if (!same_memory(w_buf_.spec, dw_.spec, g_.weight_axes, ws_))
    return Error{fmt::format("the filter buffer ({}) and cuDNN's dW ({}) are not one memory layout",
                             layout::to_string(w_buf_.spec), layout::to_string(dw_.spec))};
  VALIDATE_TRY(w_opt_.step(w_buf_, dw_, c));
  if (g_.bias) VALIDATE_TRY(b_opt_.step(b_, db_, c));
  return Status::ok();
}

Status train_conv(ConvCase& cc, const OpTask& task, const TrainPlan& plan, const Combo& combo,
                  OpResult& r) {
  const train::TrainConfig& c = plan.config;
  auto update = device_update_name(c, task.c->dtype);
  if (!update) return update.status();
  ConvStepper stepper(cc, task, combo, c);
  const auto t0 = std::chrono::steady_clock::now();
  auto out = run_device_trajectory(plan, stepper);
  if (!out) return out.status();
  for (auto& [name, t] : *out) r.outputs.insert_or_assign(name, std::move(t));
  VALIDATE_TRY(check_training_outputs(*task.c, task.op, r.outputs));
  r.info["training"] = {
      {"steps", c.steps},
      {"checkpoints", plan.checkpoints},
      {"optimizer", train::optimizer_name(c.optimizer)},
      {"update", *update},
      {"update_layout", layout::to_string(cc.filter_buffer_spec())},
      {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}};
  return Status::ok();
}

}  // namespace validate::runners::cudnn_detail
