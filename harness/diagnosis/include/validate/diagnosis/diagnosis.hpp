#pragma once
// When a tensor fails, search a space of classic mistakes and say which one, if any, makes it agree
// with the reference (docs/compare.md "Diagnosis"). Families, each in its own source file:
//  - output side (diagnosis_output_side.cpp): the bytes the program WROTE are the right values in
//    another layout than the declared one: any axis permutation (C or F order of the declared
//    axes), a flip of any subset of spatial axes, both together; for grad_weight, the cuDNN filter
//    descriptor's layout. Tested by re-reading the run's bytes (exact, no arithmetic).
//  - input side (diagnosis_conv_recompute.cpp, diagnosis_matmul_recompute.cpp): the program READ an
//    input in another layout (any permutation / F order / flips of the data, weight-layout
//    confusions OIHW/IOHW/HWIO/WHIO/OHWI, a flip on data instead of weights, a transposed matmul
//    operand) or rounded its inputs (TF32, bfloat16, float16), accumulated in a narrow type
//    (float32, bfloat16, float16 running sum), or lost / doubled the bias. Tested by recomputing
//    the op with a float64 oracle on sampled output positions.
//  - read + write pairs (diagnosis_pairs.cpp): one read mistake and one write mistake at once,
//    the commonest of each family combined.
//  - loss and gradient scale (diagnosis_loss.cpp): the loss as a sum or a mean over the wrong
//    count, the loss taken on the output before it was rounded to the case dtype, the loss of an
//    output summed with a narrow accumulator.
//  - op level (diagnosis_op.cpp): the entries of one op are read together: a write mistake leaves
//    the loss right, a read mistake does not; the loss and gradients of an op whose output has a
//    read mistake are attributed to it.
// Every hypothesis has a stable `code` (the JSON report's diagnosis.code) and the tensor and side
// it concerns, so a test can assert exactly what was named.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "validate/metrics/bounds.hpp"
#include "validate/metrics/metrics.hpp"
#include "validate/core/tensor.hpp"
#include "validate/ops/op.hpp"

namespace validate::compare {

struct Hypothesis {
  // Stable identifier of the mistake: hw_swapped, fortran_order, axes_permuted, transposed,
  // flipped, <perm code>+flipped, filter_descriptor_layout, weight_layout, flip_on_data,
  // rounded_inputs, narrow_accumulation, bias_missing, bias_doubled, loss_sum, loss_mean_count,
  // loss_unrounded_output, read_write_pair (params.read / params.write carry the two codes);
  // training checkpoints (trajectory_check.hpp): update_layout, narrow_master, optimizer_settings.
  std::string code;
  std::string tensor;  // the tensor the mistake is in ("input" when the program misread input.bin)
  std::string side;    // "output": the bytes written; "input": what was read; "numeric": arithmetic
  std::string family;  // the family that produced it (output_layout, input_layout, numeric, loss)
  nlohmann::json params = nlohmann::json::object();  // e.g. {"declared": "NCHW", "bytes": "NCWH"}
  std::string spec;         // a layout the bytes match ("NCWH", "OIHW+flip=HW") or a recipe name
  std::string description;  // "with H and W swapped (its bytes are NCWH)"
  std::string cause;        // the usual mistake behind it
  std::string fix;          // what to change, in the program's terms
  double max_abs = 0;       // residual: worst |run - hypothesis| over the checked positions
  std::int64_t beyond = 0;  // checked positions beyond tolerance
  std::int64_t checked = 0;
  bool passes = false;
  bool confirmed_all = false;  // checked on every element, not a sample
  int rank = 0;                // simplicity: lower is named first when several fit
};

struct Diagnosis {
  std::string summary;                // one sentence; "" when nothing explains the failure
  std::vector<Hypothesis> matches;    // every hypothesis that makes the tensor pass, simplest first
  std::optional<Hypothesis> closest;  // no match: the hypothesis with the smallest residual
  int tried = 0;
  std::vector<std::string> families;  // families searched, in order
  double baseline_max_abs = 0;        // on the sample, as read
  bool ambiguous = false;             // two or more different mistakes fit equally
  // Hypotheses that reproduce the declared computation on this geometry ("code (spec)"): the
  // numbers cannot tell them from a correct run, so they were not candidates.
  std::vector<std::string> coincident;
  // When nothing matches: the failure measured over the whole tensor (diagnosis_profile.cpp).
  nlohmann::json profile = nlohmann::json::object();
  // A consequence: the tensor (of the same op) whose named mistake this failure follows from —
  // the output a gradient was computed from, the first bad checkpoint of a trajectory. Reports fold
  // these under their cause.
  std::string follows_from;
  const Hypothesis* named() const { return matches.empty() ? nullptr : &matches.front(); }
};

// Convolution geometry for recomputation (from the reference metadata).
struct ConvGeometry {
  std::int64_t stride[2] = {1, 1}, padding[2] = {0, 0}, dilation[2] = {1, 1}, groups = 1;
  bool bias = false;
};

struct DiagnosisInput {
  ArrayView ref, run;
  Shape shape;       // the reference (canonical) shape
  Shape run_shape;   // the run file's shape (a permutation of `shape` when the runner transposed)
  std::string axes;  // canonical axis letters, e.g. "NCHW", "OIHW", "KN"
  ops::Op op = ops::Op::conv2d;
  std::string tensor;
  // The run's tensor is a value in memory, not a file a program wrote (the GoogleTest matchers):
  // the advice then names the tensor ("where you write grad_w", or "the tensor under test" when it
  // has no name) instead of the exec protocol's file "<tensor>.bin".
  bool in_memory = false;
  std::optional<ops::Role> role;  // none: the reference's metadata names no role
  std::string declared_layout;  // what the run declared for the tensor (run json "layouts"), if any
  std::map<std::string, std::string> declared;  // every tensor of the op -> declared layout spec
  DType logical = DType::float32;
  double floor = 0;  // near-zero floor of the reference
  std::optional<double> atol, rtol;
  std::optional<std::uint64_t> max_ulp;
  // The per-element error bound, when the tensor's gate is one (validate/metrics/bounds.hpp;
  // docs/compare.md, "Error bounds"): the reference set's scale of the tensor (canonical order, one
  // value per element, in units of options.scale_unit) and the bound's options. A hypothesis that
  // re-reads the run's values then agrees at canonical position p when |x - ref[p]| <= 2 b(ref[p],
  // scale[p]), the gate's own test of two correct stacks; atol, rtol and max_ulp, when set as well,
  // must hold too. Unset (a set without scales): atol, rtol and max_ulp alone.
  struct ElementBound {
    ArrayView scale;
    BoundOptions options;
  };
  std::optional<ElementBound> bound;
  // The float64 oracle's values of the tensor, when compare was given an oracle (numel 0 without):
  // the profile then measures the run's own error against them (diagnosis_profile.cpp).
  ArrayView exact;
  // Reference tensors of the op (inputs "A", "B" or "input", "weight", "bias", "target", and the
  // reference "output" for loss and gradient hypotheses), with canonical shapes.
  std::map<std::string, ArrayView> inputs;
  std::map<std::string, Shape> input_shapes;
  ConvGeometry conv;
  // The op's parameters (compare fills them from the reference's metadata): hypotheses that need
  // the whole float64 output recompute it through the op's own reference (harness/ops/<op>/).
  std::optional<ops::OpParams> params;
  // Loss entries: the two scalars and the loss gates, and whether the op's output failed its own
  // gate (then the output's diagnosis speaks for the op, and the loss is not searched for a narrow
  // accumulator, whose full recomputes only an output that passed needs).
  double ref_loss = 0, run_loss = 0;
  std::optional<double> loss_abs, loss_rel;
  bool output_failed = false;
  // The failure is rounding-sized: every element within the worst case of rounding in the declared
  // sums, and few of them over the bound (compare's verdict). Only the arithmetic that moves values
  // by that little is searched — operands rounded (TF32, bfloat16, float16) and a running sum kept
  // narrow, forward and backward — never a layout, which moves nearly every element by about its
  // own size.
  bool rounding_sized = false;
  std::int64_t sample = 4096;
  std::int64_t recompute_sample = 256;  // output positions recomputed per input-side hypothesis
  std::int64_t confirm_all_limit = std::int64_t{1} << 26;  // larger tensors confirm on 1M samples
  // Multiply-accumulates allowed for a full float64 forward pass (loss hypotheses that need every
  // output, e.g. the loss on the unrounded output); beyond it those hypotheses are not tried.
  std::int64_t full_forward_budget = std::int64_t{1} << 27;
};

Diagnosis diagnose(const DiagnosisInput& in);

// The sentence of a diagnosis after its hypotheses were (re)ranked.
std::string diagnosis_summary(const Diagnosis& dx, const std::string& tensor);

}  // namespace validate::compare
