#pragma once
// Device-side conversions between a tensor's storage type and the float the kernels compute in
// (bias.cu, loss.cu): widen exactly, narrow with round-to-nearest-even, as the CPU side rounds.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace validate::runners::cudnn_detail {

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }

template <class T>
__device__ __forceinline__ T narrow(float v);
template <>
__device__ __forceinline__ float narrow<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half narrow<__half>(float v) {
  return __float2half_rn(v);
}

}  // namespace validate::runners::cudnn_detail
