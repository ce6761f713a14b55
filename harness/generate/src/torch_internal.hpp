#pragma once
// What the generator's LibTorch translation units share: torch_reference.cpp (the device, the
// case's forward, loss and backward), torch_scales.cpp (the error-bound scales, the dL/dy choice,
// the partial sums of users' tensors) and torch_trajectory.cpp (a training case's trajectory).
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "validate/cases/case.hpp"
#include "validate/generate/torch_reference.hpp"
#include "validate/ops/torch_forward.hpp"

namespace validate::generate::detail {

// The LibTorch type of a case dtype, and a Tensor to LibTorch and back (from_torch copies;
// adopt_from_torch keeps LibTorch's buffer where it can).
at::ScalarType compute_type(DType logical);
at::Tensor to_torch(const Tensor& t, at::ScalarType type, const at::Device& dev);
Tensor from_torch(const at::Tensor& x, DType storage);
Tensor adopt_from_torch(const at::Tensor& x, DType storage);

// How a case's dtype is computed on a device; torch_compute and torch_trajectory follow it alike,
// so a trajectory's step 0 is the single step exactly. On the CPU, LibTorch's reduced-precision
// kernels are not the reference a GPU stack should be held to: 1.13 has no float16 convolution or
// matmul at all, and its bfloat16 GEMM accumulates in bfloat16 on some shapes (6 bfloat16 ULP off
// the exact result on the smoke set's grouped case, where cuBLAS and cuDNN accumulate in float32).
// So a bfloat16/float16 case on the CPU is computed in float32 from its (exactly representable)
// inputs and rounded to the case dtype where a native run rounds: the output before the loss,
// dL/dy before the backward pass, and every gradient once at the end. On CUDA the native kernels
// run.
struct DtypePlan {
  DType storage;
  at::ScalarType logical;
  bool emulate;
  at::ScalarType compute;  // the type tensors enter the op in
  DtypePlan(DType dtype, const at::Device& dev)
      : storage(storage_dtype(dtype)),
        logical(compute_type(dtype)),
        emulate(logical != at::kFloat && logical != at::kDouble && dev.is_cpu()),
        compute(emulate ? at::kFloat : logical) {}
  // `t` as the case dtype holds it, in the compute type, differentiably: autograd casts the incoming
  // gradient the same way (so a float32 master parameter receives the case dtype's gradient).
  at::Tensor narrow(const at::Tensor& t) const { return emulate ? t.to(logical).to(at::kFloat) : t.to(logical); }
};

// `t` rounded to the case dtype, as float32.
at::Tensor round_to(const at::Tensor& t, DType d);

// The reduction length of leaf `name`'s gradient as compare counts it (compare_bound.cpp,
// reduction_length): numel(output) K / numel(leaf), the bias numel(output) / numel(bias).
double gradient_reduction_length(const std::string& name, std::int64_t leaf_numel, double n_out, double k_op);

// The dL/dy choice of a bfloat16/float16 op (docs/compare.md, "dL/dy's rounding, stored"). Two
// correct stacks take their dL/dy = 2 (y - t) / N from the same stored output, and then either keep
// it in float32 or round it to the case dtype (LibTorch, the reference, rounds). That is a choice,
// not noise: the gradient moves by Dg = backward(op, D) with D = round(dy) - dy, computed here
// exactly for this data; so are the two routes of a bias added after the stored sum (conv2d,
// conv_transpose2d). What is left between the two stacks is rare and random: a stored value that
// rounds the other way (its float32 value within both stacks' accumulation bound of a rounding
// boundary), a dL/dy within float32 noise of one, the float32 evaluation of dL/dy, and the float32
// accumulation of both gradients. Their bound F_j on |dy_run - dy_ref| per element enters
// root-sum-square through the squared operands (choice_statistical), and
//   Z = max |Dg| + lambda0 sqrt(sum_j (F_j^2 + 2 n u^2 a_j^2) x_j^2),  a_j = |dy_j| + F_j + max |D_j|,
// lambda0 = 8, is stored per gradient element; compare adds the gradient's own accumulation and
// storage roundings of both sides (bounds.hpp, BoundOptions::choice).
struct ChoiceTerms {
  at::Tensor y32, stored, dy, D;  // the float32 forward, the stored output, dL/dy, D
  // A bias added after the stored sum (conv2d, conv_transpose2d): the float32 sum s = y - bias,
  // the output that route stores, round(round(s) + bias), and its dL/dy (undefined: no bias).
  at::Tensor sum, after, dy_after;
  // Whether the stored output is round(y32) itself (a case computed in float32): only then is the
  // output's bias-after term W (`after_term`, docs/compare.md) the other route's distance from it.
  bool fused_reference = false;
  at::Tensor after_term;
  std::map<std::string, at::Tensor> dg, spread;  // per gradient leaf: |Dg|, then Z
};

// The float32 forward of the op's own (case-dtype) leaves, and Dg from it (torch_scales.cpp).
ChoiceTerms choice_deterministic(const ops::OpParams& params, const ops::TorchLeaves& leaves, const at::Tensor& y,
                                 const at::Tensor& target, DType d, const at::Tensor* sum);

// The error-bound scale pass (torch_scales.cpp; docs/compare.md, "Error bounds"): the output's
// squared scale; `grads` receives the gradients' (with `only` non-empty, only those leaves').
// `choice`: its statistical part is filled in; `partial_sums`: the output's measured partial sums,
// which widen dL/dy's factor.
at::Tensor scale_pass(const ops::OpParams& params, const ops::TorchLeaves& leaves, const at::Tensor& y,
                      const at::Tensor& target, DType d, cases::Op op, const std::vector<std::string>& only,
                      std::map<std::string, at::Tensor>& grads, ChoiceTerms* choice = nullptr,
                      const at::Tensor* partial_sums = nullptr);

// Per output and gradient of the op, a bound on every partial sum of its sums on this data
// (torch_scales.cpp; docs/compare.md, "Partial sums on the data at hand"); `dy` is dL/dy.
std::map<std::string, at::Tensor> partial_sum_bounds(const ops::OpParams& params, const ops::TorchLeaves& leaves,
                                                     const at::Tensor& dy, cases::Op op);

}  // namespace validate::generate::detail
