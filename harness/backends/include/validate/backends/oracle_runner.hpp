#pragma once
// `--backend oracle`: conv2d and matmul (forward, MSE loss, every gradient) in float64 on the CPU,
// computed directly from the definitions, no LibTorch. It is the exact answer a comparison can be
// anchored to (`validate compare --oracle`), and it computes *in the requested layouts*: the
// canonical inputs are converted to each tensor's layout with the layout module, the arithmetic
// addresses that memory through the layout's strides, and the results are written in their own
// layouts and converted back. A conversion that disagrees with the spec it claims to implement
// therefore changes the oracle's numbers, while a correct one leaves them bit-identical: every
// output element is summed in the same canonical order whatever the layout or thread count.
#include <cstdint>
#include <functional>
#include <optional>
#include <map>
#include <memory>
#include <string>

#include "validate/cases/case.hpp"
#include "validate/core/result.hpp"
#include "validate/core/tensor.hpp"
#include "validate/layout/preset.hpp"
#include "validate/backends/runner.hpp"

namespace validate::runners {

struct OracleOptions {
  int threads = 0;  // 0: std::thread::hardware_concurrency(); results do not depend on it
};

// Ops absent from `layouts` are skipped ("op not in the layout file"), as the exec runner does.
std::unique_ptr<Runner> make_oracle_runner(const layout::LayoutSet& layouts);
std::unique_ptr<Runner> make_oracle_runner(const layout::LayoutSet& layouts,
                                           const OracleOptions& opt);

// The computation behind the runner, for tests and tools. `inputs` are canonical (float32 or
// float16 storage, widened exactly); `specs` gives every tensor of the op its layout (a tensor
// missing from it is taken as canonical). Returns canonical "output", "loss" (0-d) and the
// gradients, each rounded once from float64 to `result_dtype` (float32 or float16; the loss is
// always float32 unless result_dtype is float64, which returns the unrounded values).
// Errors: a missing or mis-shaped input, a geometry check_conv/check_matmul rejects.
// Where the time of oracle_compute goes, summed over calls (the run summary's time split).
struct OracleTimes {
  double conversion_s = 0;  // layouts in and out, widening to float64 and rounding back
  double compute_s = 0;     // the float64 kernels
};
Result<std::map<std::string, Tensor>> oracle_compute(
    const cases::Case& c, cases::Op op, const std::map<std::string, const Tensor*>& inputs,
    const layout::TensorSpecs& specs, DType result_dtype, int threads = 0, OracleTimes* times = nullptr,
    std::optional<DType> loss_on = std::nullopt);  // default: the case dtype, exact for float64 results

// A training case's trajectory (docs/training.md) in float64: every step is oracle_compute in its
// float64 mode (in the layouts of `specs`), the SGD update float64 (train/sgd.hpp). Step s >= 1
// takes its data inputs from `step_inputs(s)`. A bfloat16/float16 case trains in mixed precision
// (docs/training.md): the forward sees the parameters cast to the case dtype, the loss is taken on
// the output rounded to it, and the optimizer receives the gradients rounded to it; the master
// parameters stay float64. Returns "train_loss" (float32 [steps], each loss rounded once), the
// parameter checkpoints rounded once to float32 (float64 when `result_dtype` is) and the gradient
// checkpoints rounded once to `result_dtype`.
Result<std::map<std::string, Tensor>> oracle_trajectory(
    const cases::Case& c, cases::Op op, const std::map<std::string, const Tensor*>& inputs,
    const std::function<std::map<std::string, Tensor>(std::int64_t)>& step_inputs,
    const layout::TensorSpecs& specs, DType result_dtype, int threads = 0, OracleTimes* times = nullptr);

// double -> float16 bits, rounded to nearest even once (going through float would round twice:
// 1 + 2^-11 + 2^-40 is 1 + 2^-10 in half, but 1 through float).
std::uint16_t double_to_float16_bits(double x);

}  // namespace validate::runners
