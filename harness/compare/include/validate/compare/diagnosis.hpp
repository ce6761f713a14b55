#pragma once
// When a tensor fails, try the usual layout mistakes on the run's bytes and say which one, if any,
// makes it agree with the reference:
//  - every axis permutation of the canonical axes (for a run whose shape is a permutation of the
//    reference's, only those giving that shape): NHWC-for-NCHW, H<->W on square tensors (which no
//    shape check can see), O<->I, KN-vs-NK;
//  - the C-versus-Fortran reading (the reversed permutation, e.g. NCHW:F);
//  - spatial flips (H, W, HW) of conv tensors, alone and with a permutation (cuDNN returns dW in
//  the
//    flipped filter layout of CUDNN_CONVOLUTION mode);
//  - for outputs, recomputing the op from the reference inputs with an operand misread: matmul with
//  B
//    read as [N,K] (or A as [K,M]); conv2d with the filter flipped (convolution vs correlation).
// Each hypothesis is first checked on a deterministic sample of positions (4096), then confirmed on
// every element (on a larger sample for recomputations and huge tensors). Hypotheses are strided
// index mappings: samples are read in place, confirmation gathers slabs of at most 16M elements
// through validate::layout::permute_copy.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "validate/compare/metrics.hpp"
#include "validate/core/tensor.hpp"

namespace validate::compare {

struct Hypothesis {
  std::string
      spec;  // layout the run's bytes were read as ("NCWH", "OIHW+flip=HW", "NCHW:F") or a recipe
  std::string description;  // "with H and W flipped"
  std::string
      cause;  // "a weight gradient returned in the flipped filter layout of CUDNN_CONVOLUTION mode"
  double max_abs = 0;       // worst |run' - ref| over the checked positions
  std::int64_t beyond = 0;  // checked positions beyond tolerance
  std::int64_t checked = 0;
  bool passes = false;
  bool confirmed_all = false;  // checked on every element, not a sample
};

struct Diagnosis {
  std::string summary;                // one sentence; "" when nothing explains the failure
  std::vector<Hypothesis> matches;    // every hypothesis that makes the tensor pass, simplest first
  std::optional<Hypothesis> closest;  // no match, but this one cut the max error >= 100x
  int tried = 0;
  double baseline_max_abs = 0;  // on the sample, as read
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
  std::string op, tensor, role;
  std::string declared_layout;  // what the run declared for the tensor (run json "layouts"), if any
  DType logical = DType::float32;
  double floor = 0;  // near-zero floor of the reference
  std::optional<double> atol, rtol;
  std::optional<std::uint64_t> max_ulp;
  // Reference inputs of the op for recomputation: "A", "B" or "input", "weight", "bias", with
  // shapes.
  std::map<std::string, ArrayView> inputs;
  std::map<std::string, Shape> input_shapes;
  ConvGeometry conv;
  std::int64_t sample = 4096;
  std::int64_t confirm_all_limit = std::int64_t{1} << 26;  // larger tensors confirm on 1M samples
};

Diagnosis diagnose(const DiagnosisInput& in);

}  // namespace validate::compare
