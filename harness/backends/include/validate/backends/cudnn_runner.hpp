#pragma once
// `--backend cudnn`: conv2d through cuDNN's convolution API (forward, backward data, backward
// filter, backward bias) and matmul through cuBLASLt, each fed its tensors in the layout under test
// (converted from the reference's canonical layout on the device) and its results converted back.
// docs/cudnn.md says how each layout reaches cuDNN and why dW comes back flipped in conv mode.
//
// This header includes no CUDA header: the CLI compiles against it on any machine that built the
// runner, and the runner's CUDA types stay in its own sources.
#include <memory>
#include <string>
#include <vector>

#include "validate/core/result.hpp"
#include "validate/layout/preset.hpp"
#include "validate/backends/runner.hpp"

namespace validate::runners {

struct CudnnOptions {
  std::string device = "cuda:0";  // cuda or cuda:N
  // xcorr: CUDNN_CROSS_CORRELATION (PyTorch's conv2d). conv: CUDNN_CONVOLUTION, a true convolution:
  // it reads the filter rotated by 180 degrees, so the layout must supply pre-flipped weights
  // (the fortran preset's WHIO:F+flip=HW), and dW comes back flipped the same way. auto: the mode
  // the layout's conv2d weight spec declares (resolve_conv_mode). Whichever is asked, a mode that
  // contradicts the weight spec is refused: either mistake computes something other than conv2d.
  std::string conv_mode = "auto";
  // fma: IEEE float32 (CUDNN_FMA_MATH, CUBLAS_COMPUTE_32F); tf32: TF32 tensor cores allowed for
  // float32 (CUDNN_TENSOR_OP_MATH, CUBLAS_COMPUTE_32F_FAST_TF32); default: the libraries' defaults
  // (CUDNN_DEFAULT_MATH, which permits TF32 on Ampere and later; CUBLAS_COMPUTE_32F).
  std::string math = "fma";
  // Per direction: auto (cuDNN's heuristic, first supported), all (every algorithm cuDNN supports
  // for the case, one result each, the other directions at their auto choice), or an algorithm
  // name: fwd IMPLICIT_GEMM IMPLICIT_PRECOMP_GEMM GEMM DIRECT FFT FFT_TILING WINOGRAD
  // WINOGRAD_NONFUSED; bwd_data ALGO_0 ALGO_1 FFT FFT_TILING WINOGRAD WINOGRAD_NONFUSED; bwd_filter
  // ALGO_0 ALGO_1 FFT ALGO_3 WINOGRAD WINOGRAD_NONFUSED FFT_TILING (the CUDNN_CONVOLUTION_*_ALGO_
  // suffixes; a number is the enum value).
  std::string algo_fwd = "auto", algo_bwd_data = "auto", algo_bwd_filter = "auto";
  int repeat = 1;  // run each op this many times and flag bitwise differences between runs in info
  std::size_t max_workspace_bytes = std::size_t{4} << 30;  // algorithms needing more are skipped
  // conv2d bias (forward add, backward sum): auto = cuDNN's cudnnAddTensor /
  // cudnnConvolutionBackwardBias, probed once per case, and the runner's own kernels where cuDNN
  // refuses the descriptors; own = the runner's kernels always (tests). Not a command-line option.
  std::string bias = "auto";
};

// Checks the options (no device needed): an unknown --math, --conv-mode, algorithm name, device
// string or a repeat < 1 is an Error naming the option and the accepted values.
Status check_cudnn_options(const CudnnOptions& opt);

// The convolution mode a run uses for `layouts`, and what chose it.
struct CudnnConvMode {
  bool convolution = false;  // CUDNN_CONVOLUTION (true) or CUDNN_CROSS_CORRELATION (false)
  std::string name;          // "conv" or "xcorr"
  std::string chosen_by;     // "--conv-mode conv", or "auto: conv2d weight WHIO:F+flip=HW"
};
// `conv_mode` (auto, xcorr or conv) against the layouts' conv2d weight spec, no device needed. A
// weight flipped in H and W is stored for CUDNN_CONVOLUTION and one flipped in neither for
// CUDNN_CROSS_CORRELATION: auto takes that mode, and an explicit mode that contradicts it is an
// Error naming --conv-mode, the layout and the weight spec. A weight flipped in only one of H and
// W suits neither mode and is refused whatever is asked. Without conv2d in the layouts, auto is
// xcorr and either explicit mode is taken as given (nothing reads it).
Result<CudnnConvMode> resolve_conv_mode(const std::string& conv_mode,
                                        const layout::LayoutSet& layouts);

// The runner, or the Error of check_cudnn_options / resolve_conv_mode (no device needed). The
// device is opened in prepare(), whose Error names the CUDA call that failed (e.g. "no usable
// CUDA device: no NVIDIA driver is loaded on this machine (cudaGetDeviceCount:
// cudaErrorInsufficientDriver)").
Result<std::unique_ptr<Runner>> make_cudnn_runner(const CudnnOptions& opt,
                                                  const layout::LayoutSet& layouts);

// The algorithm names of a direction ("fwd", "bwd_data", "bwd_filter"), in enum order.
const std::vector<std::string>& cudnn_algo_names(const std::string& direction);

}  // namespace validate::runners
