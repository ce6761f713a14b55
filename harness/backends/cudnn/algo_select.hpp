#pragma once
// Which cuDNN convolution algorithms a case runs, and when the runner falls back to NCHW, decided
// in plain C++ so tests/gpu/test_cudnn_algo_select.cpp drives every branch with a fake algorithm
// table and a fake "execute" on a machine without a GPU. No CUDA or cuDNN header here.
//
// The trap this exists for: cudnnGetConvolution*Algorithm_v7 lists algorithms with status SUCCESS
// that then return CUDNN_STATUS_NOT_SUPPORTED when executed (the heuristics judge the descriptors,
// not every kernel's constraints). PyTorch's algorithm iterator therefore tries each candidate once
// and moves on when one is not supported; a runner that reports such a failure as an `error`
// makes `compare` fail a stack that is fine.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "validate/core/result.hpp"

namespace validate::runners::cudnn_detail {

enum class Direction { fwd, bwd_data, bwd_filter };
constexpr Direction kDirections[] = {Direction::fwd, Direction::bwd_data, Direction::bwd_filter};
const char* direction_name(Direction d);  // "fwd", "bwd_data", "bwd_filter"
int algo_count(Direction d);
std::string algo_name(Direction d, int algo);  // "IMPLICIT_PRECOMP_GEMM", or the number if unknown

// What a run record says ran (info["algorithms"], read by the error bounds): per produced tensor
// (conv_geometry.hpp's produced_tensor: "output", "grad_input", "grad_weight") the algorithm
// family whose rounding the bound models: "direct" (IMPLICIT_GEMM, IMPLICIT_PRECOMP_GEMM, GEMM,
// DIRECT and the backward ALGO_0/1/3, which all sum products in some order), "fft", "fft_tiling",
// "winograd" (WINOGRAD and WINOGRAD_NONFUSED; cuDNN does not say which tile it uses). An unknown
// enum value is "any" (compare's bound over every algorithm), never a family it may not belong to.
// The names are compare's (validate/cases/algorithm.hpp, parse_algorithm).
std::string algorithm_family(Direction d, int algo);
// "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED" (info["cudnn_algorithms"]).
std::string cudnn_enum_name(Direction d, int algo);
// A cuBLASLt matmul: "direct" unless the heuristic's algorithm splits K, then "split_k:S" with
// S = CUBLASLT_ALGO_CONFIG_SPLITK_NUM, or "any" when S could not be read but a reduction scheme
// (CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME != NONE) says the sum is split (compare's names need S).
// A negative argument means "could not be read".
std::string gemm_algorithm_family(int splitk_num, int reduction_scheme);

// --algo-* after parsing.
struct AlgoRequest {
  enum Kind { automatic, all, named } kind = automatic;
  int algo = -1;  // named
};
Result<AlgoRequest> parse_algo(Direction d, const std::string& text);

// cudnnMathType_t's values (conv.cpp static_asserts them against cudnn.h).
enum class MathType : int {
  default_math = 0,
  tensor_op = 1,
  tensor_op_allow_conversion = 2,
  fma = 3
};
const char* math_type_name(MathType m);  // "CUDNN_FMA_MATH", ...

// The math type a candidate is executed with. The conv descriptor's math type is what cuDNN runs,
// and the heuristics report, per algorithm, the math type they judged it under; PyTorch sets that
// per candidate before executing it, so what is recorded is what ran. Two exceptions keep the
// user's request: `requested` FMA (float32 with --math fma, the default) always runs FMA, so a
// candidate reported with tensor-op math cannot slip TF32 into a float32 run; and float32 never
// runs TENSOR_OP_MATH_ALLOW_CONVERSION (it may down-convert float32 data to float16).
MathType applied_math(MathType requested, MathType heuristic, bool float32);

// Does this failing cudnnStatus_t say "not supported for these descriptors / this algorithm"
// (CUDNN_STATUS_NOT_SUPPORTED and its 30xx sub-codes), i.e. try the next candidate? The 30xx codes
// that describe the installation (incompatible driver or runtime, architecture mismatch, missing
// prerequisite or sub-library) are not: every algorithm would fail the same way, so they are
// errors that must be seen.
bool cudnn_status_is_not_supported(int status);
// For the legacy bias calls (cudnnAddTensor, cudnnConvolutionBackwardBias): not supported, or a
// BAD_PARAM (20xx) for a descriptor they do not accept (strided tensors, bfloat16), means "use the
// runner's own kernel instead".
bool cudnn_status_rejects_call(int status);

struct Choice {
  int algo = -1;
  std::size_t workspace = 0;
  bool deterministic = false;
  MathType heuristic_math = MathType::default_math;  // what the heuristics reported
  MathType math = MathType::default_math;            // what it is executed with (applied_math)
  std::string selected_by;                           // heuristic | named | all
};

struct Combo {
  Choice c[3];  // indexed by Direction
  // "fwd=IMPLICIT_PRECOMP_GEMM,bwd_data=ALGO_1,bwd_filter=ALGO_1": the algorithms that ran.
  std::string label() const;
};

// The heuristics' usable candidates per direction, best first, and why others were left out.
struct AlgoTable {
  std::vector<Choice> cand[3];
  std::string rejected[3];  // workspace too large, workspace query failed
};

// What executing one combo reported.
struct Attempt {
  enum Kind { ok, unsupported, error } kind = ok;
  Direction direction = Direction::fwd;  // whose call failed (unsupported: the one to skip)
  std::string message;
};

// One result to report.
struct Planned {
  Combo combo;
  std::string variant;  // the label under --algo all, else ""
  Attempt attempt;      // unsupported: report the case/variant as `unsupported`, not `error`
  int attempt_index;    // which call of the try callback produced it; -1 = not executed again
};

struct Selection {
  // ok: `results` holds the baseline (first) and, under --algo all, every variant.
  // unsupported / error: no baseline could run; `message` says why, `results` is empty for
  // unsupported and holds the failing attempt for error.
  Attempt::Kind outcome = Attempt::ok;
  std::string message;
  std::vector<Planned> results;
  // Candidates the heuristics listed whose execution was not supported, per direction:
  // "WINOGRAD_NONFUSED: CUDNN_STATUS_NOT_SUPPORTED ...; FFT: ...". Recorded, never retried.
  std::string dropped[3];
};

using TryCombo = std::function<Attempt(const Combo&)>;

// Picks the baseline — per direction the named algorithm, else the heuristics' first candidate
// that executes — by executing combos through `try_combo` (each call is a real run whose result
// the caller keeps): an `unsupported` attempt drops that direction's candidate and tries its
// next; a named algorithm that is not supported, or a direction whose every candidate is not,
// makes the case unsupported; an `error` attempt ends the selection with that error. Under
// --algo all, then each other candidate of an `all` direction with the other two at the baseline
// (one direction varied at a time: the sum of the algorithms, not their product), each tried
// once; a candidate already dropped while finding the baseline is reported unsupported without
// being executed again.
Selection select_algorithms(const AlgoTable& table, const AlgoRequest (&req)[3],
                            const TryCombo& try_combo);

// setup's choice of descriptors. `build(convert)` creates the descriptors and queries the
// heuristics (convert = every tensor that is not NCHW/OIHW is converted to it on the device);
// `feasible(&why)` says whether the built table has an algorithm for every direction (the named
// one where one is named); `nothing_to_convert()` says whether the layouts as given already are
// NCHW/OIHW. A failed build of the layouts as given (a descriptor cuDNN refuses, a heuristics
// query that fails) and an infeasible table both take the fallback; only when the fallback is
// the same build, or fails too, is it an error. Returns the fallback's reason, "" when none.
Result<std::string> choose_layouts(const std::function<Status(bool convert)>& build,
                                   const std::function<bool(std::string* why)>& feasible,
                                   const std::function<bool()>& nothing_to_convert);

}  // namespace validate::runners::cudnn_detail
