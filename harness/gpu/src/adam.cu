// The device Adam update (adam.hpp): one thread per element, grid-stride, the element arithmetic
// in adam_element.hpp (shared with the CPU test).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "adam_element.hpp"
#include "validate/gpu/adam.hpp"
#include "validate/gpu/check.hpp"

namespace validate::gpu {

namespace {

__global__ void adam_kernel(float* __restrict__ p, const float* __restrict__ g,
                            float* __restrict__ m, float* __restrict__ v, std::int64_t n,
                            AdamHyper h) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    kernels::adam_element(p[i], g[i], m[i], v[i], h);
}

}  // namespace

AdamHyper adam_hyper(double lr, double beta1, double beta2, double eps, double weight_decay,
                     std::int64_t step) {
  AdamHyper h;
  const double t = static_cast<double>(step);
  h.beta1 = static_cast<float>(beta1);
  h.beta2 = static_cast<float>(beta2);
  h.keep1 = static_cast<float>(1.0 - beta1);
  h.keep2 = static_cast<float>(1.0 - beta2);
  h.weight_decay = static_cast<float>(weight_decay);
  h.use_weight_decay = weight_decay != 0;
  h.eps = static_cast<float>(eps);
  h.step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, t)));
  h.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, t)));
  return h;
}

Status adam_update(float* param, const float* grad, float* m, float* v, std::int64_t n,
                   const AdamHyper& h, cudaStream_t stream) {
  if (n < 0) return Error{fmt::format("gpu::adam_update: negative element count {}", n)};
  if (n == 0) return Status::ok();
  if (!param || !grad || !m || !v)
    return Error{"gpu::adam_update: null parameter, gradient or moment"};
  const std::int64_t blocks = std::min<std::int64_t>((n + 255) / 256, 1 << 16);
  adam_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(param, grad, m, v, n, h);
  VALIDATE_GPU_TRY(cudaGetLastError());
  return Status::ok();
}

}  // namespace validate::gpu
