#pragma once
// The runner's own bias kernels (bias.cu), used when cuDNN's legacy cudnnAddTensor /
// cudnnConvolutionBackwardBias refuse the case's descriptors. Those two calls predate cuDNN's
// strided-tensor and bfloat16 support and may reject the fortran preset's strided CHWN:F output or
// a bfloat16 tensor; PyTorch does not use them either (it adds the bias and sums dL/dy itself).
#include <cstdint>

#include <cuda_runtime_api.h>

#include "validate/core/dtype.hpp"
#include "validate/core/result.hpp"

namespace validate::runners::cudnn_detail {

// An NCHW-indexed activation in any dense, unflipped layout: sizes and per-axis element strides.
struct ActivationGeometry {
  std::int64_t size[4];    // n, c, h, w
  std::int64_t stride[4];  // element stride of n, c, h, w in the buffer
};

// y[n,c,h,w] = round(float(y) + float(b[c])) in dtype dt (what cudnnAddTensor with alpha = beta = 1
// computes).
Status bias_add(void* y, const void* b, DType dt, const ActivationGeometry& g, cudaStream_t stream);
// db[c] = round(sum over n,h,w of float(dy[n,c,h,w])) in dtype dt: one block per channel, a fixed
// tree reduction (deterministic, no atomics).
Status bias_grad(const void* dy, void* db, DType dt, const ActivationGeometry& g,
                 cudaStream_t stream);

}  // namespace validate::runners::cudnn_detail
