#pragma once
// A bias in the rounding of a whole tensor: what per-element bounds cannot see (docs/compare.md,
// "Rounding bias"). Each element of a bfloat16 tensor stored by truncation is within its bound, but
// every one errs toward zero; a uniform relative bias of 0.3% is inside a bfloat16 element's bound
// too. Over N elements such a bias stands out of the unbiased rounding noise by a factor of sqrt(N).
//
// The estimate is the ratio beta = sum sign(ref_i) (run_i - ref_i) / sum |ref_i| (the relative bias
// that best explains the signed errors, dominated by the large elements, so no division by a value
// near zero), its standard error se = sqrt(sum d_i^2) / sum |ref_i| with d_i = sign(ref_i)
// (run_i - ref_i) - beta |ref_i| (independent elements), and the excess over the bias a correct
// stack may have, z = (|beta| - allowed) / se. Every sum over elements is taken in float64 in eight
// lanes, element i into lane i mod 8 in index order, the lanes added as ((l0 + l1) + (l2 + l3)) +
// ((l4 + l5) + (l6 + l7)): the figures are the same to the last bit at any thread count and in every
// ISA.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "validate/metrics/bounds.hpp"
#include "validate/metrics/metrics.hpp"

namespace validate::compare {

// The relative bias two correct stacks may share: factors common to every element rounded in
// float32 (2/N of a mean-squared-error gradient, an FFT's 1/L normalization per axis) — the panel's
// float32 FFT convolution leans 2.2e-7 to 2.9e-7 (about 4 u) toward zero on its gradients — allowed
// 16 u = 2^-20, four times that. Operands rounded on purpose (TF32 under policies/tf32.json) add
// their own unit roundoff u_o (the panel's TF32 stack leans up to 0.33 u_o), and a value rounded to
// the case dtype on one side only (dL/dy, or a sum stored before its bias is added) its u_d^2:
// round-to-nearest shrinks a value by Var(r) / v on average (E[v (round(v) - v)] = -Var(r), r the
// rounding error, about u_d^2 / 3 relative), which carries into every sum built from it — the float64
// oracle's bfloat16 gradients lean up to 5e-6 against the reference's (see allowed_bias).
constexpr double kAllowedRelativeBias = 0x1p-20;
// The allowance with operands rounded to unit roundoff `operand_u` (0: float32 operands) and a case
// dtype of unit roundoff `case_u`.
inline double allowed_bias(double operand_u, double case_u) {
  return kAllowedRelativeBias + operand_u + case_u * case_u;
}
// The same for a tensor whose bound has options `o` (its case dtype and operand rounding).
inline double allowed_bias(const BoundOptions& o) { return allowed_bias(o.operand_u, unit_roundoff(o.dtype)); }
// The relative bias a correct float32 accumulation can put into the tensor `ref` (an output whose
// bound has options `o` and scale `scale`): a sum's rounding errors lean one way where its terms
// share a sign (a term under half a unit of the running sum is dropped, every drop toward zero), so
// its mean error is not 0, but it is at most the error's root-mean-square, which the bound's
// accumulation term A_i = u sqrt(n) (|y_i| + rho_i) bounds per unit lambda (partial sums within
// |y_i| + rho_i). Over the tensor, sum A_i / sum |y_i| (the elements rounding_bias weighs:
// finite, nonzero reference). Added to allowed_bias(o) by the check (docs/compare.md, "Rounding bias").
double accumulation_bias(const ArrayView& ref, const ArrayView& scale, const BoundOptions& o);

// Named at z >= 6: for a sum of independent terms the normal tail beyond 6 standard errors is
// 1e-9 per tensor (a sweep of 10^4 tensors trips it with probability 1e-5), once the bias itself is
// within the allowance.
constexpr double kRoundingBiasZ = 6;

struct RoundingBias {
  double relative = 0;  // beta: > 0 away from zero, < 0 toward zero
  double se = 0;        // its standard error
  double z = 0;         // (|beta| - allowed) / se; 0 when there is nothing to measure
  std::int64_t elements = 0, toward_zero = 0, away_from_zero = 0;
  // Over blocks (a gradient): how many held an element, the degrees of freedom of se and the z a
  // Student t of that many degrees of freedom exceeds as rarely as a normal exceeds 6. Over
  // independent elements (an output): blocks 0 and the normal's kRoundingBiasZ.
  std::int64_t blocks = 0;
  double dof = 0;
  double threshold = kRoundingBiasZ;
  bool biased() const { return z >= threshold; }
};

// Over the elements where both values are finite and the reference is not zero.
RoundingBias rounding_bias(const ArrayView& ref, const ArrayView& run, double allowed = kAllowedRelativeBias);

// How a gradient's elements group by the dL/dy elements they are sums of (docs/compare.md,
// "Rounding bias"): elements that differ in the index of any of `axes` share none, except along the
// last of them, where blocks up to `lag` apart still share some (a conv's grad_input rows h and h'
// both read dL/dy rows when |h - h'| <= (KH - 1) dilation). One rounded dL/dy element moves every
// element of its block the same way, so the errors are independent from block to block only.
struct BiasBlocks {
  std::vector<int> axes;
  std::int64_t lag = 0;
};
// The grouping of gradient `tensor` (canonical axis letters `axes`): grad_A by its row (M; a row of
// dL/dy each), grad_B by its column (N), grad_weight by its output channel (O; a channel of dL/dy
// each), grad_bias by element, grad_input by sample and row (N, H) with lag (kernel_h - 1)
// dilation_h (by sample alone when kernel_h is unknown, 0). nullopt for any other tensor.
std::optional<BiasBlocks> gradient_blocks(const std::string& tensor, const std::string& axes, std::int64_t kernel_h,
                                          std::int64_t dilation_h);
// The same estimate with the standard error of blocks (a ratio estimator's cluster variance, with
// the covariance of blocks up to `lag` apart): sum over blocks of D_b^2 + 2 sum D_b D_{b+l},
// D_b = sum over the block of (e_i - beta |r_i|), never below the sum of D_b^2; G = blocks / (lag +
// 1) independent groups, variance times G / (G - 1), dof G - 1. z 0 with fewer than 3 groups.
RoundingBias rounding_bias(const ArrayView& ref, const ArrayView& run, const Shape& shape, const BiasBlocks& blocks,
                           double allowed);
// rounding_bias (over `blocks` when given, else over independent elements) and accumulation_bias of
// one tensor, their sums taken in one pass over it where the storages allow (float32 reference and
// run, a float32 or float16 scale): the same sums in the same order, so the same figures as the
// two functions.
struct BiasAndAccumulation {
  RoundingBias bias;
  double accumulated = 0;
};
BiasAndAccumulation rounding_bias_and_accumulation(const ArrayView& ref, const ArrayView& run, const ArrayView& scale,
                                                   const BoundOptions& o, const Shape& shape,
                                                   const BiasBlocks* blocks, double allowed);
// The z a Student t with `dof` degrees of freedom exceeds (either sign) with the probability a
// normal exceeds kRoundingBiasZ (2.0e-9): 6.0 for many, 6.6 at 100, 8.5 at 30, 24 at 9, 99 at 5.
double rounding_bias_threshold(double dof);

// `b` (from either rounding_bias) with its z for another allowance, as if it had been computed
// with `allowed`: the estimate's sums do not depend on it, so it can be taken before the allowance
// is known (compare sums the accumulation bias that goes into it beside the estimate).
RoundingBias with_allowance(RoundingBias b, double allowed);

}  // namespace validate::compare
