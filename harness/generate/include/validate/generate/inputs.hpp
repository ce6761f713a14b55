#pragma once
// The inputs of a case, drawn from the harness's own counter-based RNG keyed by
// (seed, case, op, tensor) — never from LibTorch's RNG, so hashes are identical on every device,
// shard and LibTorch version.
#include <map>
#include <string>
#include <vector>

#include "validate/cases/case.hpp"
#include "validate/core/tensor.hpp"

namespace validate::generate {

enum class Fill { random, exact };

// Scales follow real initialisation so the loss is O(1): input, A, target ~ N(0,1); weight, B ~
// N(0,1)/sqrt(K); bias ~ 0.1 N(0,1). Low-precision dtypes round the float32 draw to nearest even.
// Fill::exact draws small integers at a density low enough that every float32 partial sum of a
// dot product of length K is exact: density = min(1, 2^24 / (max|x| * max|w| * K)) (benchdnn's rule).
//
// Returned tensors are in the reference's storage dtype: float32 for float32 and bfloat16 cases,
// float16 for float16 cases. Large tensors are drawn on `threads` threads (0: every core) with
// the same bits as one thread.
//
// `step` > 0 (a training case, docs/training.md): only the data inputs (input, A, target — not the
// parameters, which the optimizer carries), each from its step-0 stream re-keyed by the step
// (train::step_stream); step 0 is exactly the single-step case's inputs. Built without LibTorch
// (library validate_inputs): the runners draw the later steps' batches with it.
std::map<std::string, Tensor> make_inputs(const cases::Case& c, cases::Op op, std::uint64_t seed, Fill fill,
                                          int threads = 0, std::int64_t step = 0);

// A case's "inputs" (cases/input_dist.hpp) replace the random fill's normal draw tensor by
// tensor: relu_normal, log_uniform, student_t, sparse, or an .npy file's values; each from the
// same (seed, case, op, tensor) stream, element i from i alone. A float16 case holds a draw
// beyond float16's range at +-65504.
//
// Refuses (before anything is written) what make_inputs cannot draw: --fill exact with any
// distribution but the normal, and a user .npy whose values pass float16's range in a float16 case.
Status check_inputs(const std::vector<cases::Case>& list, Fill fill, const std::string& cases_path);

}  // namespace validate::generate
