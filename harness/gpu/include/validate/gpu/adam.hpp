#pragma once
// The Adam update of a training trajectory on the device: one float32 parameter tensor updated in
// place, in torch.optim.Adam's semantics (validate/train/adam.hpp states them: L2 weight decay
// into the gradient, no AMSGrad, bias corrections computed in double once per step). Elementwise,
// so any memory layout works as long as the parameter, its gradient and both moment buffers share
// it (the caller checks).
#include <cstdint>

#include <cuda_runtime_api.h>

#include "validate/core/result.hpp"

namespace validate::gpu {

// The per-step constants rounded to float as train::adam_step<float> rounds them.
struct AdamHyper {
  float beta1 = 0.9f, beta2 = 0.999f;
  float keep1 = 0.1f, keep2 = 0.001f;  // 1 - beta, computed in double, then rounded
  float weight_decay = 0, eps = 1e-8f;
  bool use_weight_decay = false;
  float step_size = 0;  // lr / (1 - beta1^t)
  float bc2_sqrt = 0;   // sqrt(1 - beta2^t)
};

// `step` is t = 1, 2, ...: the bias corrections of that step.
AdamHyper adam_hyper(double lr, double beta1, double beta2, double eps, double weight_decay,
                     std::int64_t step);

// param[i] updated from grad[i] with the moments m and v (n floats each, the parameter's layout;
// zero them before step 1). Each operation rounded on its own (no fused multiply-add; sqrt and
// division correctly rounded), exactly as train::adam_step<float> on the CPU. Device pointers,
// asynchronous on `stream`.
Status adam_update(float* param, const float* grad, float* m, float* v, std::int64_t n,
                   const AdamHyper& h, cudaStream_t stream = nullptr);

}  // namespace validate::gpu
