// The Runner behind `--backend cudnn`: option checking without a device, prepare() opening the
// device and the library handles, and run() dispatching each op.
#include "validate/runners/cudnn_runner.hpp"

#include <fmt/format.h>

#include "internal.hpp"

namespace validate::runners {

namespace {

using namespace cudnn_detail;

class CudnnRunner final : public Runner {
 public:
  explicit CudnnRunner(Context ctx) : ctx_(std::move(ctx)) {}
  std::string name() const override { return "cudnn"; }

  Status prepare() override {
    // Every failure names its call; without a usable GPU the message is "no usable CUDA device: <why>".
    auto dev = gpu::open_device(ctx_.parsed.device);
    if (!dev) return Error{"--backend cudnn: " + dev.message()};
    ctx_.device = *dev;
    VALIDATE_GPU_TRY(cudnnCreate(ctx_.cudnn.out()));
    VALIDATE_GPU_TRY(cublasLtCreate(ctx_.lt.out()));
    // cudnn.h and libcudnn must agree (a header from one install and a library from another is the
    // classic silent mismatch); cuDNN 9 checks its sub-libraries the same way.
    if (cudnnGetVersion() / 10000 != CUDNN_MAJOR)
      return Error{fmt::format(
          "cuDNN library version {} does not match the headers this runner was built with ({})",
          cudnnGetVersion(), CUDNN_VERSION)};
    VALIDATE_GPU_TRY(cudnnCnnVersionCheck());
    prepared_ = true;
    return Status::ok();
  }

  nlohmann::json info() const override {
    nlohmann::json j;
    j["backend"] = "cudnn";
    j["device"] = ctx_.options.device;
    j["math"] = ctx_.options.math;
    j["conv_mode"] = ctx_.options.conv_mode;
    j["algo"] = {{"fwd", ctx_.options.algo_fwd},
                 {"bwd_data", ctx_.options.algo_bwd_data},
                 {"bwd_filter", ctx_.options.algo_bwd_filter}};
    j["repeat"] = ctx_.options.repeat;
    j["tf32"] =
        ctx_.options.math != "fma";  // default math permits TF32 in cuDNN on Ampere and later
    j["cudnn_headers"] = CUDNN_VERSION;
    j["cublaslt_headers"] = CUBLAS_VERSION;
    if (prepared_) {
      j["gpu"] = gpu::to_json(ctx_.device);
      j["cudnn_version"] = cudnnGetVersion();
      j["cudnn_cudart_version"] = cudnnGetCudartVersion();
      j["cublaslt_version"] = cublasLtGetVersion();
    }
    return j;
  }

  std::vector<OpResult> run(const OpTask& task) override {
    if (!prepared_) {
      OpResult r;
      r.outcome = RunOutcome::error;
      r.message = "cudnn runner used before prepare()";
      std::vector<OpResult> v;
      v.push_back(std::move(r));
      return v;
    }
    switch (task.op) {
      case cases::Op::conv2d: return run_conv(ctx_, task);
      case cases::Op::matmul: return run_matmul(ctx_, task);
      case cases::Op::conv_transpose2d: break;  // not implemented (backward-data as forward would do)
    }
    // An op this runner does not implement is said so, never run down another op's path.
    OpResult r;
    r.outcome = RunOutcome::unsupported;
    r.message = std::string("the cudnn runner does not implement ") + cases::op_name(task.op);
    std::vector<OpResult> v;
    v.push_back(std::move(r));
    return v;
  }

 private:
  Context ctx_;
  bool prepared_ = false;
};

}  // namespace

Status check_cudnn_options(const CudnnOptions& opt) { return parse_options(opt).status(); }

Result<std::unique_ptr<Runner>> make_cudnn_runner(const CudnnOptions& opt,
                                                  const layout::LayoutSet& layouts) {
  auto parsed = parse_options(opt);
  if (!parsed) return parsed.status();
  Context ctx;
  ctx.options = opt;
  ctx.parsed = *parsed;
  ctx.layouts = layouts;
  return std::unique_ptr<Runner>(std::make_unique<CudnnRunner>(std::move(ctx)));
}

const std::vector<std::string>& cudnn_algo_names(const std::string& direction) {
  static const auto table = [] {
    std::map<std::string, std::vector<std::string>> t;
    for (Direction d : kDirections)
      for (int a = 0; a < algo_count(d); ++a) t[direction_name(d)].push_back(algo_name(d, a));
    return t;
  }();
  static const std::vector<std::string> none;
  auto it = table.find(direction);
  return it == table.end() ? none : it->second;
}

}  // namespace validate::runners
