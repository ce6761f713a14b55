// The loss both ops end in, computed on the device in float32 as every backend computes it: MSE between
// the output (upcast to float32) and the target, and dL/dy = (2/n)(y - t) — PyTorch's
// mse_loss_backward, norm * (y - t) with norm = 2/n rounded to float once — rounded to the output's
// dtype, which is what autograd hands the backward pass for a bfloat16 output cast to float32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include <fmt/format.h>

#include "loss.hpp"
#include "validate/gpu/check.hpp"
#include "element_cast.cuh"

namespace validate::runners::cudnn_detail {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxPartials = 1024;  // first-pass blocks; the second pass is one block

// Tree reduction of one value per thread within a block; the order is fixed by the block size, so
// the result is the same bits every run (no atomics anywhere in the loss).
__device__ float block_sum(float v) {
  __shared__ float s[kThreads];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  return s[0];
}

template <class T>
__global__ void loss_partials(const T* __restrict__ y, const float* __restrict__ t, std::int64_t n,
                              float norm, T* __restrict__ dy, float* __restrict__ partials) {
  float acc = 0.f;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    const float d = widen(y[i]) - t[i];
    acc += d * d;
    dy[i] = narrow<T>(norm * d);
  }
  const float s = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

__global__ void loss_final(const float* __restrict__ partials, int count, float n,
                           float* __restrict__ loss) {
  float acc = 0.f;
  for (int i = threadIdx.x; i < count; i += kThreads) acc += partials[i];
  const float s = block_sum(acc);
  if (threadIdx.x == 0) *loss = s / n;
}

int partial_blocks(std::int64_t n) {
  return static_cast<int>(std::clamp<std::int64_t>((n + kThreads - 1) / kThreads, 1, kMaxPartials));
}

template <class T>
Status launch(const void* y, const float* t, std::int64_t n, void* dy, float* loss, float* scratch,
              cudaStream_t stream) {
  const int blocks = partial_blocks(n);
  const float norm = static_cast<float>(2.0 / static_cast<double>(n));
  loss_partials<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(y), t, n, norm,
                                                    static_cast<T*>(dy), scratch);
  VALIDATE_GPU_TRY(cudaGetLastError());
  loss_final<<<1, kThreads, 0, stream>>>(scratch, blocks, static_cast<float>(n), loss);
  VALIDATE_GPU_TRY(cudaGetLastError());
  return Status::ok();
}

}  // namespace

std::int64_t loss_scratch_floats(std::int64_t n) { return partial_blocks(n); }

Status mse_loss_grad(const void* y, DType ydt, const float* t, std::int64_t n, void* dy,
                     float* loss, float* scratch, cudaStream_t stream) {
  if (n <= 0) return Error{"mse loss over an empty tensor"};
  switch (ydt) {
    case DType::float32:
      return launch<float>(y, t, n, dy, loss, scratch, stream);
    case DType::bfloat16:
      return launch<__nv_bfloat16>(y, t, n, dy, loss, scratch, stream);
    case DType::float16:
      return launch<__half>(y, t, n, dy, loss, scratch, stream);
    default:
      return Error{fmt::format("mse loss: unsupported output dtype {}", dtype_name(ydt))};
  }
}

}  // namespace validate::runners::cudnn_detail
