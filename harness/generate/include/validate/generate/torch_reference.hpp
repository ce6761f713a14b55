#pragma once
// The LibTorch computation of a case: forward, MSE loss and autograd gradients. This header is
// LibTorch-free so only torch_reference.cpp pays for LibTorch's headers.
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "validate/cases/case.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/result.hpp"
#include "validate/core/tensor.hpp"

namespace validate::generate {

struct TorchDevice {
  std::string requested = "cpu";  // "cpu", "cuda", "cuda:N"
  std::string used = "cpu";       // after a fallback
  bool allow_tf32 = false;
  std::string fallback_reason;    // non-empty when cuda was asked for and cpu is used
  int threads = 1;                // LibTorch intra-op (OpenMP) threads in force
  std::string threads_source;     // "--threads", "OMP_NUM_THREADS" or "all hardware threads"
};

// Resolves "cpu" / "cuda" / "cuda:N", falling back to cpu (with a reason) when no GPU is usable;
// sets TF32 and determinism flags for conv and matmul, and LibTorch's (and so OpenBLAS-OpenMP's)
// thread count: `threads` > 0, else OMP_NUM_THREADS, else every core (LibTorch 1.13's own default
// is one thread per physical core it detects, which is 1 on a 2-vCPU VM).
Result<TorchDevice> open_torch_device(const std::string& requested, bool allow_tf32, int threads = 0);

// Runs one op of a case: inputs in storage dtype (canonical layout) -> output, loss (0-d float32)
// and gradients, in storage dtype. `info` receives how it was computed (e.g. a float16 op that
// this LibTorch cannot run on CPU and was computed in float32 and rounded).
// Where torch_compute's time goes, summed over calls (kept out of `info`, which goes into
// reference metadata and must not change between runs).
struct TorchTimes {
  double conversion_s = 0;  // our tensors into LibTorch and results back out
  double compute_s = 0;     // forward, loss and backward
};
Result<std::map<std::string, Tensor>> torch_compute(const cases::Case& c, cases::Op op,
                                                    const std::map<std::string, const Tensor*>& inputs,
                                                    const TorchDevice& device, Json* info = nullptr,
                                                    TorchTimes* times = nullptr, bool scales = false);
// With `scales`, torch_compute also returns "<tensor>_scale" for the output and every gradient:
// the root-sum-square of the products summed into each element (docs/compare.md, "Error bounds"),
// the op's own forward and backward run on squared operands in float32. compare derives each
// element's error bound from it.

// The training trajectory of one op of a training case (docs/training.md): c.train->steps steps of
// forward, MSE loss, backward and torch::optim::SGD (PyTorch's update, in float32), from the step-0
// inputs `in`; step s >= 1 takes its data inputs from `step_inputs(s)` (parameters carry over).
// Returns "train_loss" (float32 [steps]) and the checkpoint tensors (train/tensor_names.hpp).
// Step 0 computes exactly what torch_compute does. Errors: not a float32 training case, a
// non-finite loss (naming the step), a missing batch tensor.
using StepInputs = std::function<std::map<std::string, Tensor>(std::int64_t step)>;
Result<std::map<std::string, Tensor>> torch_trajectory(const cases::Case& c, cases::Op op,
                                                       const std::map<std::string, const Tensor*>& in,
                                                       const StepInputs& step_inputs, const TorchDevice& device,
                                                       TorchTimes* times = nullptr, bool scales = false);
// With `scales`, an SGD trajectory also returns "<checkpoint>_scale" for every checkpoint tensor:
// its two-stack error bound at lambda = 8 divided by 2 lambda (docs/training.md, "Checkpoint
// bounds"), the rounding of every step's gradient carried through the case's SGD. Adam: none.

// LibTorch, CUDA, cuDNN versions, device name, TF32 and determinism flags, threads, and the BLAS
// actually loaded (core/blas_info.hpp).
Json torch_system_info(const TorchDevice& device);

}  // namespace validate::generate
