#pragma once
// The device loss kernel's entry point (loss.cu), kept apart from internal.hpp so nvcc compiles
// only what the kernel needs.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "validate/core/dtype.hpp"
#include "validate/core/result.hpp"

namespace validate::runners::cudnn_detail {

// MSE loss over n elements of y (dtype ydt) against float32 t in the same memory order, and
// dL/dy = (2/n)(y - t) written to dy in ydt; loss (one float) stays on the device. Deterministic:
// a fixed two-pass tree reduction, no atomics. `scratch` holds at least loss_scratch_floats(n).
Status mse_loss_grad(const void* y, DType ydt, const float* t, std::int64_t n, void* dy,
                     float* loss, float* scratch, cudaStream_t stream);
std::int64_t loss_scratch_floats(std::int64_t n);

}  // namespace validate::runners::cudnn_detail
