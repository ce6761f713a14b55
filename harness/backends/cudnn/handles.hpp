#pragma once
// RAII for every cuDNN / cuBLASLt / CUDA handle and descriptor the runner creates, and the status
// traits that let VALIDATE_GPU_TRY name failing cuDNN and cuBLAS calls like CUDA ones. Private to
// the runner: the public header stays free of CUDA types.
#include <cstdio>
#include <string>
#include <utility>

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "validate/gpu/check.hpp"

namespace validate::gpu {

template <>
struct StatusTraits<cudnnStatus_t> {
  static bool ok(cudnnStatus_t s) { return s == CUDNN_STATUS_SUCCESS; }
  static std::string text(cudnnStatus_t s) {
    // cuDNN 9 keeps a thread-local explanation of the last failure ("... NHWC filter requires
    // ..."); it says far more than the status name.
    char detail[512] = {};
    cudnnGetLastErrorString(detail, sizeof detail);
    std::string t = cudnnGetErrorString(s);
    if (detail[0]) t += std::string(" — ") + detail;
    return t;
  }
};

template <>
struct StatusTraits<cublasStatus_t> {
  static bool ok(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }
  static std::string text(cublasStatus_t s) {
    return std::string(cublasLtGetStatusString(s)) + " (" + cublasLtGetStatusName(s) + ")";
  }
};

}  // namespace validate::gpu

namespace validate::runners::cudnn_detail {

// Owns one handle; Destroy is the library's destroy function. Move-only, so each handle is
// destroyed exactly once whichever way a case ends.
template <class T, auto Destroy>
class Unique {
 public:
  Unique() = default;
  Unique(Unique&& o) noexcept : h_(std::exchange(o.h_, T{})) {}
  Unique& operator=(Unique&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, T{});
    }
    return *this;
  }
  Unique(const Unique&) = delete;
  Unique& operator=(const Unique&) = delete;
  ~Unique() { reset(); }

  T get() const { return h_; }
  operator T() const { return h_; }  // NOLINT: passed straight to the C APIs
  // For the create functions: cudnnCreateTensorDescriptor(d.out()).
  T* out() {
    reset();
    return &h_;
  }
  void reset() {
    // A destroy that fails has no caller to report to; the library's next checked call will.
    if (h_) (void)Destroy(h_);
    h_ = T{};
  }

 private:
  T h_{};
};

using CudnnHandle = Unique<cudnnHandle_t, cudnnDestroy>;
using TensorDesc = Unique<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDesc = Unique<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvDesc = Unique<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;
using LtHandle = Unique<cublasLtHandle_t, cublasLtDestroy>;
using LtMatmulDesc = Unique<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using LtLayout = Unique<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using LtPreference = Unique<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;
using Event = Unique<cudaEvent_t, cudaEventDestroy>;

}  // namespace validate::runners::cudnn_detail
