// The Runner behind `--backend cudnn`: option checking without a device, prepare() opening the
// device and the library handles, and run() dispatching each op.
#include "validate/backends/cudnn_runner.hpp"

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
    j["conv_mode"] = ctx_.conv_mode.name;
    j["conv_mode_chosen_by"] = ctx_.conv_mode.chosen_by;
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
      // cudnnConvolutionBackwardData as the forward, as PyTorch does (conv_geometry.hpp).
      case cases::Op::conv_transpose2d:
        return run_conv(ctx_, task);
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

Result<CudnnConvMode> resolve_conv_mode(const std::string& conv_mode,
                                        const layout::LayoutSet& layouts) {
  if (conv_mode != "auto" && conv_mode != "xcorr" && conv_mode != "conv")
    return Error{"--conv-mode '" + conv_mode + "': expected auto, xcorr or conv"};
  auto mode = [](bool convolution, std::string chosen_by) {
    return CudnnConvMode{convolution, convolution ? "conv" : "xcorr", std::move(chosen_by)};
  };
  const layout::Spec* w = layouts.find("conv2d", "weight");
  if (!w) return mode(conv_mode == "conv", conv_mode == "auto" ? "auto: no conv2d in the layouts"
                                                                : "--conv-mode " + conv_mode);
  const std::string spec = layout::to_string(*w);
  const bool flip_h = w->flip.find('H') != std::string::npos;
  const bool flip_w = w->flip.find('W') != std::string::npos;
  if (flip_h != flip_w)
    return Error{fmt::format(
        "--conv-mode {}: layout '{}' stores the conv2d weight as {}, flipped in {} only; cuDNN "
        "reads a filter either as stored (xcorr) or rotated by 180 degrees in H and W (conv), so "
        "neither mode computes conv2d from it (declare +flip=HW for conv mode, or no spatial flip "
        "for xcorr)",
        conv_mode, layouts.name, spec, flip_h ? 'H' : 'W')};
  // Flipped in H and W: the kernel is stored rotated for CUDNN_CONVOLUTION, which rotates it back.
  const bool want = flip_h && flip_w;
  if (conv_mode == "auto") return mode(want, "auto: conv2d weight " + spec);
  if ((conv_mode == "conv") == want) return mode(want, "--conv-mode " + conv_mode);
  if (want)
    return Error{fmt::format(
        "--conv-mode xcorr contradicts layout '{}': its conv2d weight {} is stored rotated by 180 "
        "degrees for CUDNN_CONVOLUTION, and cross-correlating with the rotated kernel is not "
        "conv2d (leave --conv-mode out, or pass --conv-mode conv)",
        layouts.name, spec)};
  return Error{fmt::format(
      "--conv-mode conv contradicts layout '{}': its conv2d weight {} is not flipped, and "
      "CUDNN_CONVOLUTION reads the filter rotated by 180 degrees, a true convolution that is not "
      "conv2d (leave --conv-mode out, or pass --conv-mode xcorr)",
      layouts.name, spec)};
}

Result<std::unique_ptr<Runner>> make_cudnn_runner(const CudnnOptions& opt,
                                                  const layout::LayoutSet& layouts) {
  auto parsed = parse_options(opt);
  if (!parsed) return parsed.status();
  auto conv_mode = resolve_conv_mode(opt.conv_mode, layouts);
  if (!conv_mode) return conv_mode.status();
  Context ctx;
  ctx.options = opt;
  ctx.parsed = *parsed;
  ctx.parsed.convolution_mode = conv_mode->convolution;
  ctx.conv_mode = *conv_mode;
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
