// The device optimizer step of one parameter (device_param.hpp).
#include "device_param.hpp"

#include <fmt/format.h>

#include "validate/gpu/adam.hpp"
#include "validate/gpu/cast.hpp"

namespace validate::runners::cudnn_detail {

Result<std::string> device_update_name(const train::TrainConfig& c, DType dtype) {
  std::string kernel;
  switch (c.optimizer) {
    case train::Optimizer::sgd:
      kernel = "gpu::sgd_update";
      break;
    case train::Optimizer::adam:
      kernel = "gpu::adam_update";
      break;
    default:
      return Error{"the device update implements SGD and Adam only"};
  }
  if (dtype == DType::float32)
    return "own CUDA kernel (" + kernel + ", float32, no FMA contraction)";
  if (dtype == DType::bfloat16 || dtype == DType::float16)
    return fmt::format(
        "own CUDA kernel ({}, mixed precision: float32 master in the parameter's layout, "
        "{} gradient widened to float32, master rounded to {} for the forward)",
        kernel, dtype_name(dtype), dtype_name(dtype));
  return Error{fmt::format("the device trajectory trains float32, bfloat16 and float16, not {}",
                           dtype_name(dtype))};
}

Status DeviceParam::start(DeviceTensor& param, const Tensor& host, const std::string& name) {
  VALIDATE_TRY(reupload(param, host, name));
  mixed_ = param.dtype != DType::float32;
  if (mixed_) {
    auto m = upload(host, DType::float32, param.spec, param.axes, name + " (float32 master)");
    if (!m) return m.status();
    master_ = std::move(*m);
  }
  t_ = 0;
  return Status::ok();
}

namespace {

Status ensure(gpu::DeviceBuffer& b, std::size_t bytes, const char* what) {
  if (b.size() == bytes) return Status::ok();
  auto nb = gpu::DeviceBuffer::allocate(bytes, what);
  if (!nb) return nb.status();
  b = std::move(*nb);
  return Status::ok();
}

}  // namespace

Status DeviceParam::step(DeviceTensor& param, const DeviceTensor& grad,
                         const train::TrainConfig& c) {
  const std::int64_t n = param.numel();
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  if (grad.numel() != n || grad.dtype != param.dtype)
    return Error{fmt::format("the gradient ({} {}) does not match the parameter ({} {})",
                             dtype_name(grad.dtype), grad.numel(), dtype_name(param.dtype), n)};
  if (mixed_ != (param.dtype != DType::float32))
    return Error{"the parameter was not started (DeviceParam::start) in its dtype"};
  float* p = mixed_ ? master_.buf.as<float>() : param.buf.as<float>();
  const float* g = grad.buf.as<float>();
  if (mixed_) {  // the backward of the cast: the gradient widened to float32, exactly
    VALIDATE_TRY(ensure(grad32_, bytes, "float32 gradient"));
    VALIDATE_TRY(gpu::cast(grad.buf.data(), grad.dtype, grad32_.data(), DType::float32, n));
    g = grad32_.as<float>();
  }
  const bool first = t_ == 0;
  ++t_;
  if (c.optimizer == train::Optimizer::adam) {
    VALIDATE_TRY(ensure(s1_, bytes, "Adam m"));
    VALIDATE_TRY(ensure(s2_, bytes, "Adam v"));
    if (first) {
      VALIDATE_GPU_TRY(cudaMemsetAsync(s1_.data(), 0, bytes));
      VALIDATE_GPU_TRY(cudaMemsetAsync(s2_.data(), 0, bytes));
    }
    VALIDATE_TRY(
        gpu::adam_update(p, g, s1_.as<float>(), s2_.as<float>(), n,
                         gpu::adam_hyper(c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, t_)));
  } else {
    const gpu::SgdHyper h =
        gpu::sgd_hyper(c.lr, c.momentum, c.dampening, c.weight_decay, c.nesterov);
    if (h.use_momentum) VALIDATE_TRY(ensure(s1_, bytes, "momentum buffer"));
    VALIDATE_TRY(gpu::sgd_update(p, g, h.use_momentum ? s1_.as<float>() : nullptr, n, h, first));
  }
  // The forward of the next step reads the master rounded to the case dtype.
  if (mixed_)
    VALIDATE_TRY(gpu::cast(master_.buf.data(), DType::float32, param.buf.data(), param.dtype, n));
  return Status::ok();
}

Result<Tensor> DeviceParam::read(const DeviceTensor& param, DType storage) const {
  if (mixed_) return download(master_, master_.spec, DType::float32);
  return download(param, param.spec, storage);
}

}  // namespace validate::runners::cudnn_detail
