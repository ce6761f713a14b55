#pragma once
// One element of the SGD update (sgd.hpp), as a host+device function: the kernel in sgd.cu calls
// it per thread, and tests/gpu calls the very same function on the CPU against
// train::sgd_step<float>, bit for bit — so the update's arithmetic is proven without a GPU.
//
// Why the _rn intrinsics: nvcc contracts a*b + c into one fused multiply-add by default
// (--fmad=true), which rounds once where PyTorch's CPU reference and sgd_step round twice. The
// difference is an ulp per step, inside the trajectory gate, but a bit-exact kernel lets the CPU
// test be exact and leaves the gate's margin to the stacks being compared.
#include "validate/gpu/sgd.hpp"

#if defined(__CUDACC__)
#define VALIDATE_SGD_HD __host__ __device__ __forceinline__
#else
#define VALIDATE_SGD_HD inline
#endif

namespace validate::gpu::kernels {

VALIDATE_SGD_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
VALIDATE_SGD_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
VALIDATE_SGD_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// torch.optim.SGD, in this order: weight decay into the gradient, then the momentum buffer, then
// Nesterov, then the step. `b` is the element's momentum buffer (unused without momentum).
VALIDATE_SGD_HD void sgd_element(float& p, float g, float& b, bool first_step, const SgdHyper& h) {
  if (h.use_weight_decay) g = add_rn(g, mul_rn(h.weight_decay, p));
  if (h.use_momentum) {
    b = first_step ? g : add_rn(mul_rn(h.momentum, b), mul_rn(h.keep, g));
    g = h.nesterov ? add_rn(g, mul_rn(h.momentum, b)) : b;
  }
  p = sub_rn(p, mul_rn(h.lr, g));
}

}  // namespace validate::gpu::kernels
