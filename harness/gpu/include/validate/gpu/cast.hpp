#pragma once
// Element type conversion on the device. A bfloat16 reference is stored as float32 (exact); the
// device computes in bfloat16, so inputs are narrowed on the device (round to nearest even, NaN
// stays NaN — the same rule as validate::float_to_bfloat16_bits) and results widened back (exact).
#include <cstdint>

#include <cuda_runtime_api.h>

#include "validate/core/dtype.hpp"
#include "validate/core/result.hpp"

namespace validate::gpu {

// dst[i] = convert(src[i]) for i < n; float32, bfloat16 and float16 in any combination (same type:
// a copy). Device pointers, asynchronous on `stream`.
Status cast(const void* src, DType from, void* dst, DType to, std::int64_t n,
            cudaStream_t stream = nullptr);

}  // namespace validate::gpu
