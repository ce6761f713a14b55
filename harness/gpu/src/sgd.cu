// The device SGD update (sgd.hpp): one thread per element, grid-stride, the element arithmetic in
// sgd_element.hpp (shared with the CPU test).
#include <algorithm>

#include <fmt/format.h>

#include "sgd_element.hpp"
#include "validate/gpu/check.hpp"
#include "validate/gpu/sgd.hpp"

namespace validate::gpu {

namespace {

__global__ void sgd_kernel(float* __restrict__ p, const float* __restrict__ g,
                           float* __restrict__ b, std::int64_t n, SgdHyper h, bool first_step) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float unused = 0.f;
    float& buf = h.use_momentum ? b[i] : unused;
    kernels::sgd_element(p[i], g[i], buf, first_step, h);
  }
}

}  // namespace

SgdHyper sgd_hyper(double lr, double momentum, double dampening, double weight_decay,
                   bool nesterov) {
  SgdHyper h;
  h.lr = static_cast<float>(lr);
  h.momentum = static_cast<float>(momentum);
  h.keep = static_cast<float>(1.0 - dampening);
  h.weight_decay = static_cast<float>(weight_decay);
  h.use_momentum = momentum != 0;
  h.use_weight_decay = weight_decay != 0;
  h.nesterov = nesterov;
  return h;
}

Status sgd_update(float* param, const float* grad, float* momentum, std::int64_t n,
                  const SgdHyper& h, bool first_step, cudaStream_t stream) {
  if (n < 0) return Error{fmt::format("gpu::sgd_update: negative element count {}", n)};
  if (n == 0) return Status::ok();
  if (!param || !grad) return Error{"gpu::sgd_update: null parameter or gradient"};
  if (h.use_momentum && !momentum)
    return Error{"gpu::sgd_update: momentum without a momentum buffer"};
  const std::int64_t blocks = std::min<std::int64_t>((n + 255) / 256, 1 << 16);
  sgd_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(param, grad, momentum, n, h,
                                                                first_step);
  VALIDATE_GPU_TRY(cudaGetLastError());
  return Status::ok();
}

}  // namespace validate::gpu
