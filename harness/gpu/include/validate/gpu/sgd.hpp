#pragma once
// The SGD update of a training trajectory on the device (docs/training.md, docs/cudnn.md): one
// float32 parameter tensor updated in place from its gradient, in torch.optim.SGD's semantics
// (validate/train/sgd.hpp states them). Elementwise, so it works in any memory layout — as long
// as the parameter, its gradient and its momentum buffer share that layout; the caller checks
// that (the trap this whole feature exists for: dW handed back in the filter layout and applied as
// if it were another).
#include <cstdint>

#include <cuda_runtime_api.h>

#include "validate/core/result.hpp"

namespace validate::gpu {

// The hyper-parameters rounded to float once, as train::sgd_step<float> rounds them, and which
// terms are on (decided on the double values, as sgd_step does).
struct SgdHyper {
  float lr = 0;
  float momentum = 0;
  float keep = 1;  // 1 - dampening, computed in double, then rounded
  float weight_decay = 0;
  bool use_momentum = false;
  bool use_weight_decay = false;
  bool nesterov = false;
};

SgdHyper sgd_hyper(double lr, double momentum, double dampening, double weight_decay,
                   bool nesterov);

// param[i] -= lr * update(grad[i]) for i < n, with the momentum buffer `momentum` (n floats, the
// parameter's layout; required when h.use_momentum, ignored otherwise). `first_step`: the buffer
// is initialised to the gradient (torch.optim.SGD's first step), not read. Each operation is
// rounded on its own (no fused multiply-add), exactly as train::sgd_step<float> on the CPU, so the
// two agree bit for bit. Device pointers, asynchronous on `stream`.
Status sgd_update(float* param, const float* grad, float* momentum, std::int64_t n,
                  const SgdHyper& h, bool first_step, cudaStream_t stream = nullptr);

}  // namespace validate::gpu
