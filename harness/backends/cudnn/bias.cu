// The runner's own bias-add and bias-gradient kernels (bias.hpp says when they run).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <fmt/format.h>

#include "bias.hpp"
#include "element_cast.cuh"
#include "validate/gpu/check.hpp"

namespace validate::runners::cudnn_detail {

namespace {

constexpr int kThreads = 256;

// One thread per element, walking the canonical n,c,h,w order.
template <class T>
__global__ void add_kernel(T* __restrict__ y, const T* __restrict__ b, ActivationGeometry g) {
  const std::int64_t total = g.size[0] * g.size[1] * g.size[2] * g.size[3];
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    std::int64_t r = i;
    const std::int64_t w = r % g.size[3];
    r /= g.size[3];
    const std::int64_t h = r % g.size[2];
    r /= g.size[2];
    const std::int64_t c = r % g.size[1];
    const std::int64_t n = r / g.size[1];
    const std::int64_t off = n * g.stride[0] + c * g.stride[1] + h * g.stride[2] + w * g.stride[3];
    y[off] = narrow<T>(widen(y[off]) + widen(b[c]));
  }
}

// One block per channel; each thread sums a fixed subset in a fixed order, then a fixed tree.
template <class T>
__global__ void grad_kernel(const T* __restrict__ dy, T* __restrict__ db, ActivationGeometry g) {
  __shared__ float s[kThreads];
  const std::int64_t c = blockIdx.x;
  const std::int64_t per = g.size[0] * g.size[2] * g.size[3];
  float acc = 0.f;
  for (std::int64_t i = threadIdx.x; i < per; i += kThreads) {
    const std::int64_t w = i % g.size[3];
    const std::int64_t h = (i / g.size[3]) % g.size[2];
    const std::int64_t n = i / (g.size[3] * g.size[2]);
    acc += widen(dy[n * g.stride[0] + c * g.stride[1] + h * g.stride[2] + w * g.stride[3]]);
  }
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int k = kThreads / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[c] = narrow<T>(s[0]);
}

template <class T>
Status launch_add(void* y, const void* b, const ActivationGeometry& g, cudaStream_t stream) {
  const std::int64_t total = g.size[0] * g.size[1] * g.size[2] * g.size[3];
  const int blocks =
      static_cast<int>(std::min<std::int64_t>((total + kThreads - 1) / kThreads, 65535));
  add_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<T*>(y), static_cast<const T*>(b), g);
  VALIDATE_GPU_TRY(cudaGetLastError());
  return Status::ok();
}

template <class T>
Status launch_grad(const void* dy, void* db, const ActivationGeometry& g, cudaStream_t stream) {
  grad_kernel<T><<<static_cast<unsigned>(g.size[1]), kThreads, 0, stream>>>(
      static_cast<const T*>(dy), static_cast<T*>(db), g);
  VALIDATE_GPU_TRY(cudaGetLastError());
  return Status::ok();
}

bool empty(const ActivationGeometry& g) {
  return g.size[0] <= 0 || g.size[1] <= 0 || g.size[2] <= 0 || g.size[3] <= 0;
}

}  // namespace

Status bias_add(void* y, const void* b, DType dt, const ActivationGeometry& g,
                cudaStream_t stream) {
  if (empty(g)) return Status::ok();
  switch (dt) {
    case DType::float32:
      return launch_add<float>(y, b, g, stream);
    case DType::bfloat16:
      return launch_add<__nv_bfloat16>(y, b, g, stream);
    case DType::float16:
      return launch_add<__half>(y, b, g, stream);
    default:
      return Error{fmt::format("bias add: unsupported dtype {}", dtype_name(dt))};
  }
}

Status bias_grad(const void* dy, void* db, DType dt, const ActivationGeometry& g,
                 cudaStream_t stream) {
  if (empty(g)) return Status::ok();
  switch (dt) {
    case DType::float32:
      return launch_grad<float>(dy, db, g, stream);
    case DType::bfloat16:
      return launch_grad<__nv_bfloat16>(dy, db, g, stream);
    case DType::float16:
      return launch_grad<__half>(dy, db, g, stream);
    default:
      return Error{fmt::format("bias gradient: unsupported dtype {}", dtype_name(dt))};
  }
}

}  // namespace validate::runners::cudnn_detail
