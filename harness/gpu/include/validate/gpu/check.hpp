#pragma once
// One way to check every CUDA, cuDNN and cuBLAS status: VALIDATE_GPU_TRY(call) returns a Status
// naming the failing call ("cudaMalloc(…) failed: out of memory (cudaErrorMemoryAllocation)") and
// never throws. A status type joins by specialising StatusTraits<S> with
//   static bool ok(S);  static std::string text(S);
// This header does cudaError_t; the cuDNN runner adds cudnnStatus_t and cublasStatus_t.
// Why a macro: the message must carry the call as written, and only the preprocessor has it.
#include <string>
#include <string_view>

#include <cuda_runtime_api.h>

#include "validate/core/result.hpp"

namespace validate::gpu {

template <class S>
struct StatusTraits;  // specialised per library status type

std::string gpu_error_text(cudaError_t e);  // "out of memory (cudaErrorMemoryAllocation)"

template <>
struct StatusTraits<cudaError_t> {
  static bool ok(cudaError_t e) { return e == cudaSuccess; }
  static std::string text(cudaError_t e) { return gpu_error_text(e); }
};

// "cudaMalloc(&p, n)" -> "cudaMalloc(…)": the function is what a reader needs; the argument
// expressions would only make the one-line message unreadable.
std::string call_name(std::string_view call);

template <class S>
Status check(S status, const char* call) {
  if (StatusTraits<S>::ok(status)) return Status::ok();
  return Error{call_name(call) + " failed: " + StatusTraits<S>::text(status)};
}

}  // namespace validate::gpu

// Evaluates `call` once; on failure returns the Status from the enclosing function (which must
// return Status or Result<T>).
#define VALIDATE_GPU_TRY(call)                                          \
  do {                                                                  \
    ::validate::Status _gpu_st = ::validate::gpu::check((call), #call); \
    if (!_gpu_st.is_ok()) return _gpu_st;                               \
  } while (0)

// The same check as an expression, for callers that collect rather than return.
#define VALIDATE_GPU_CHECK(call) ::validate::gpu::check((call), #call)
