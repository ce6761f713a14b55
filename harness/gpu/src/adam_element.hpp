#pragma once
// One element of the Adam update (adam.hpp), as a host+device function: adam.cu's kernel calls it
// per thread, and tests/gpu calls the very same function on the CPU against
// train::adam_step<float>, bit for bit. The _rn intrinsics keep nvcc from contracting a*b + c
// into one fused multiply-add and from its approximate square root and division, each of which
// rounds differently from the CPU reference (sgd_element.hpp says why that matters).
#include <cmath>

#include "sgd_element.hpp"
#include "validate/gpu/adam.hpp"

namespace validate::gpu::kernels {

VALIDATE_SGD_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
VALIDATE_SGD_HD float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

// torch.optim.Adam, in train::adam_step's order and roundings.
VALIDATE_SGD_HD void adam_element(float& p, float g, float& m, float& v, const AdamHyper& h) {
  if (h.use_weight_decay) g = add_rn(g, mul_rn(h.weight_decay, p));
  m = add_rn(mul_rn(h.beta1, m), mul_rn(h.keep1, g));
  v = add_rn(mul_rn(h.beta2, v), mul_rn(mul_rn(h.keep2, g), g));
  const float denom = add_rn(div_rn(sqrt_rn(v), h.bc2_sqrt), h.eps);
  p = sub_rn(p, mul_rn(h.step_size, div_rn(m, denom)));
}

}  // namespace validate::gpu::kernels
