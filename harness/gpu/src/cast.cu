// dtype conversion kernels (cast.hpp). CUDA's own intrinsics do the rounding: __float2bfloat16_rn
// and __float2half_rn are round-to-nearest-even with NaN preserved, the rule validate::dtype uses
// on the CPU, so a bfloat16 input narrowed here has the bits the reference's rounding gave it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <fmt/format.h>

#include "validate/gpu/cast.hpp"
#include "validate/gpu/check.hpp"

namespace validate::gpu {

namespace {

__device__ __forceinline__ float load(const float* p, std::int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16* p, std::int64_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ float load(const __half* p, std::int64_t i) {
  return __half2float(p[i]);
}
__device__ __forceinline__ void store(float* p, std::int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, std::int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}
__device__ __forceinline__ void store(__half* p, std::int64_t i, float v) {
  p[i] = __float2half_rn(v);
}

// Every conversion goes through float: bfloat16 and float16 widen to float exactly, so
// float16 -> bfloat16 is one rounding, as on the CPU.
template <class From, class To>
__global__ void cast_kernel(const From* __restrict__ src, To* __restrict__ dst, std::int64_t n) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    store(dst, i, load(src, i));
}

template <class From, class To>
Status run(const void* src, void* dst, std::int64_t n, cudaStream_t stream) {
  const std::int64_t blocks = std::min<std::int64_t>((n + 255) / 256, 1 << 16);
  cast_kernel<From, To><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      static_cast<const From*>(src), static_cast<To*>(dst), n);
  VALIDATE_GPU_TRY(cudaGetLastError());
  return Status::ok();
}

template <class From>
Status run_to(const void* src, void* dst, DType to, std::int64_t n, cudaStream_t stream) {
  switch (to) {
    case DType::float32:
      return run<From, float>(src, dst, n, stream);
    case DType::bfloat16:
      return run<From, __nv_bfloat16>(src, dst, n, stream);
    case DType::float16:
      return run<From, __half>(src, dst, n, stream);
    default:
      return Error{fmt::format("gpu::cast: unsupported target dtype {}", dtype_name(to))};
  }
}

}  // namespace

Status cast(const void* src, DType from, void* dst, DType to, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return Status::ok();
  if (from == to) {
    VALIDATE_GPU_TRY(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n) * dtype_size(from),
                                     cudaMemcpyDeviceToDevice, stream));
    return Status::ok();
  }
  switch (from) {
    case DType::float32:
      return run_to<float>(src, dst, to, n, stream);
    case DType::bfloat16:
      return run_to<__nv_bfloat16>(src, dst, to, n, stream);
    case DType::float16:
      return run_to<__half>(src, dst, to, n, stream);
    default:
      return Error{fmt::format("gpu::cast: unsupported source dtype {}", dtype_name(from))};
  }
}

}  // namespace validate::gpu
