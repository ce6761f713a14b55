#include "validate/backends/torch_runner.hpp"

#include "validate/generate/torch_reference.hpp"

namespace validate::runners {

namespace {

// On CUDA, LibTorch lets cuDNN choose a convolution's algorithm (its heuristics or benchmark mode:
// Winograd, FFT, implicit GEMM) and does not say which, so a convolution's output and gradients
// are bounded by "any" (the loosest algorithm the geometry admits). On the CPU they are direct.
std::map<std::string, std::string> conv_algorithms(const OpTask& task, const std::map<std::string, Tensor>& outputs) {
  std::map<std::string, std::string> out;
  if (task.op != cases::Op::conv2d && task.op != cases::Op::conv_transpose2d) return out;
  for (const char* t : {"output", "grad_input", "grad_weight"})
    if (outputs.count(t)) out[t] = "any";
  return out;
}

class TorchRunner final : public Runner {
 public:
  explicit TorchRunner(TorchOptions opt) : opt_(std::move(opt)) {}
  std::string name() const override { return "torch"; }

  Status prepare() override {
    auto dev = generate::open_torch_device(opt_.device, opt_.allow_tf32, opt_.threads);
    if (!dev) return dev.status();
    device_ = *dev;
    if (!device_.fallback_reason.empty())
      return Error{"--device " + opt_.device + ": " + device_.fallback_reason +
                   " (a cross-device run on the CPU would prove nothing; use --device cpu explicitly)"};
    return Status::ok();
  }

  nlohmann::json info() const override {
    auto j = generate::torch_system_info(device_);
    j["math"] = opt_.allow_tf32 ? "tf32" : "fma";
    j["time_s"] = {{"compute", times_.compute_s}, {"conversion", times_.conversion_s}};
    return j;
  }

  std::vector<OpResult> run(const OpTask& task) override {
    OpResult r;
    nlohmann::json info;
    auto out = generate::torch_compute(*task.c, task.op, task.inputs, device_, &info, &times_);
    if (out && task.c->train) {
      auto traj = generate::torch_trajectory(*task.c, task.op, task.inputs, task.step_inputs, device_, &times_);
      if (traj) out->merge(*traj);
      else out = traj.status();
    }
    if (!out) {
      r.outcome = RunOutcome::error;
      r.message = out.message();
    } else {
      r.outputs = std::move(*out);
      r.info = info;
      r.info["device"] = device_.used;
      if (device_.used != "cpu") r.notes.algorithms = conv_algorithms(task, r.outputs);
    }
    std::vector<OpResult> v;
    v.push_back(std::move(r));
    return v;
  }

 private:
  TorchOptions opt_;
  generate::TorchDevice device_;
  generate::TorchTimes times_;
};

}  // namespace

Result<std::unique_ptr<Runner>> make_torch_runner(const TorchOptions& opt) {
  return std::unique_ptr<Runner>(std::make_unique<TorchRunner>(opt));
}

}  // namespace validate::runners
