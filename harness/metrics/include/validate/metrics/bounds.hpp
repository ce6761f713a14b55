#pragma once
// Per-element error bounds: the default element gate of outputs and gradients when the reference
// set carries error-bound scales (docs/compare.md, "Error bounds" has the derivation).
//
// For an element y that a correct stack computes as a sum of n products a_i b_i in float32, with
// inputs and intermediates (dL/dy) possibly rounded to the case dtype (unit roundoff u_d) and the
// result stored in the case dtype, the error of one side against the exact value is bounded, with
// probability at least 1 - 2 exp(-lambda^2 / 2) per term under the standard model of independent
// rounding errors, by
//     b = lambda * (u sqrt(n) (|y| + rho) + u_p rho) + u_d |y| + eta
// (a gradient with a split scale: lambda (u sqrt(n) |y| + u_p S) + u_d |y| + eta, see
// BoundOptions::split_gradient),
// rho = sqrt(sum (a_i b_i)^2) (the set's scale tensor), u = 2^-24 (float32 accumulation),
// u_p = u_d for a gradient (dL/dy rounded to the case dtype) and u for an output (products), eta
// half the case dtype's subnormal spacing plus n half float32 subnormal spacings (underflow).
// An output whose op adds a term after the sum (a bias) may also be rounded to the case dtype
// before that addition (cuDNN's cudnnAddTensor after cudnnConvolutionForward, LibTorch on CUDA):
// one more rounding of s = y - bias, at most u_d |s| <= u_d (|y| + max |bias|), added to b, or,
// where the set stores that route's output (BoundOptions::after), held to it instead.
// Two correct stacks differ by at most sqrt(2) lambda (statistical part) + 2 (deterministic part):
// their rounding errors are independent, so the lambda terms of the two sides add in
// root-sum-square; with a float64 oracle the run alone is held to b against the exact value, so a
// run at least as close to exact as the reference never fails.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "validate/metrics/metrics.hpp"
#include "validate/core/dtype.hpp"
#include "validate/core/result.hpp"

namespace validate::compare {

struct BoundOptions {
  DType dtype = DType::float32;  // the case dtype: the result's storage rounding, u_d
  bool gradient = false;          // u_p = u_d (dL/dy in the case dtype) instead of u
  double n = 1;                   // reduction length of the element (largest over the tensor)
  double lambda = 8;              // the policy's `bound`
  // The scale is a bound per unit lambda and per side (a training checkpoint's, docs/training.md
  // "Checkpoint bounds"): one side's bound is lambda * scale, nothing added.
  bool per_lambda = false;
  // max |bias| of an output whose op adds a bias after the sum (0: none): the sum may be stored in
  // the case dtype before the bias is added, one more rounding, u_d (|y| + added_after).
  double added_after = 0;
  // Unit roundoff of the products' operands when a stack rounds them before multiplying (TF32:
  // 2^-11; 0: float32 operands, exact products of case-dtype inputs). Each product then errs by up
  // to 2 u_o + u_o^2, so u_p grows by that; a gradient's dL/dy also carries the forward's error,
  // which the scale bounds by the same term once more (docs/compare.md, "TF32 on purpose").
  double operand_u = 0;
  // A gradient's scale is S = sqrt(n (u/u_d)^2 rho_a^2 + rho_p^2) (quantity "rss_gradient_terms"):
  // rho_a over its actual products (the accumulation term's), rho_p over the products with dL/dy
  // widened by what may move it (the u_p term's); the two kinds of rounding are independent, so
  // they combine in root-sum-square: lambda (u sqrt(n) |y| + u_p S). Sets whose gradient scale is
  // rho_p alone ("rss_products") keep lambda (u sqrt(n) (|y| + rho) + u_p rho).
  bool split_gradient = false;
  // What one unit of the scale array stands for: a set's float16 scale is value * 2^unit_log2
  // (docs/formats.md, "scales"); float32 scales 1.
  double scale_unit = 1;
  // Per element, the run's own algorithm's term times lambda (algorithm_bounds.hpp: Winograd,
  // FFT), added to the run's side of the bound only; null for the direct sum (and split-K, whose
  // bound is the direct sum's: docs/compare.md, "Algorithm-aware bounds").
  const double* run_extra = nullptr;
  // A bfloat16/float16 gradient's stored dL/dy choice term Z (the set's "<grad>_choice", float16
  // times choice_unit; generate computes it at lambda 8): two correct stacks differ by at most
  // R + stored_roundings(ref, run, R), R = Z max(1, lambda / 8) + sqrt(2) lambda u sqrt(n) |g| (+ the
  // run's algorithm term). Without an oracle the element is held to the smaller of that and the noise-model bound
  // (both sound: docs/compare.md, "dL/dy's rounding, stored"); with one, a run farther from the
  // exact value than the reference must also be within it of the reference. Null: the noise model
  // alone. Not for a run whose output is another algorithm's or whose operands are rounded (TF32):
  // the choice's flips were bounded with the direct sum's float32 output error.
  const ArrayView* choice = nullptr;
  double choice_unit = 1;
  // A bfloat16/float16 output's stored bias-after term W (the set's "output_choice", float16 times
  // after_unit; generate computes it at lambda 8 from its float32 sum s): how far the output the
  // other route stores, round(round(s) + bias), lies from the reference's round(s + bias), plus
  // ULP(round(s)) + ULP of that output where s lies near enough to a rounding boundary of the case
  // dtype for another stack's round(s) to differ. It replaces added_after: two correct stacks differ
  // by at most max(the fused route's bound, W), W capped at the bound with added_after (a stored
  // term never loosens the gate); with an oracle, a run farther from the exact value than the
  // reference by at most W more (docs/compare.md, "The bias added after the sum, stored").
  // Not for a run whose output is another algorithm's or whose operands are rounded, nor at
  // lambda > 8: the flips were bounded with the direct sum's float32 error at lambda 8.
  const ArrayView* after = nullptr;
  double after_unit = 1;
};

// The bound of one side at an element with reference value y and scale rho (one stack's error
// against the exact value), and its worst-case counterpart: gamma_n (|y| + sqrt(n) rho) + u_p
// sqrt(n) rho + u_d |y| + eta (sum |a_i b_i| <= sqrt(n) rho; for a split gradient scale S the
// accumulated products' sum is at most min(sqrt(n) (1 + u_d), u_d / u) S), reported, never gated on.
double side_bound(double y, double rho, const BoundOptions& o);
// Two correct stacks against each other (no oracle): each side's lambda terms, independent, in
// root-sum-square, and both sides' stored roundings: sqrt(2) lambda statistical + 2 deterministic.
double two_stack_bound(double y, double rho, const BoundOptions& o);
// The same at element i of a tensor whose options carry a stored dL/dy choice (o.choice): the
// smaller of that and the choice's bound, as the gate takes it; with a stored bias-after term
// (o.after), the larger of the fused route's bound and that term capped at the bound with
// added_after.
// `run`: the run's value at i (the choice's bound counts its stored rounding at its own magnitude).
double two_stack_bound_at(double y, double rho, const BoundOptions& o, std::int64_t i, double run);
// The stored bias-after term W at element i (o.after), 0 without one and where it is not a finite
// value >= 0 (the fused route's bound then stands alone: a broken term never loosens the gate). The
// worst case of that route is W itself: the gate's worst-case figure is raised to it.
double after_term(const BoundOptions& o, std::int64_t i);
// The options without the stored bias-after term: the fused route's noise-model bound, at which
// the term is capped (and which a diagnosis's linear terms use: no stored term describes a
// rescaled value).
BoundOptions without_after(BoundOptions o);
// side_bound = lambda * statistical + deterministic: the many accumulation and product roundings
// (their root-sum-square per unit lambda) and the one or two roundings of the stored result.
struct SideParts {
  double statistical = 0, deterministic = 0;
};
SideParts side_parts(double y, double rho, const BoundOptions& o);
double worst_case_bound(double y, double rho, const BoundOptions& o);
// The spacing of the case dtype at |v| (its subnormal spacing below the normal range).
double dtype_ulp(double v, DType d);
// The two stored roundings of one element held to a stored choice, each side's as its stored value
// shows it: a value v of the case dtype rounded to nearest from a float32 sum x is within half the
// spacing at |x| of it, and the spacing at |x| is at most the spacing at |v| (rounding never leaves
// x's binade downward, and an x below a power of two that rounds up to it had the finer spacing).
// The run's x also lies within `reach` (what the bound allows besides the roundings) of the
// reference's r, so its spacing is at most that at |ref| + half its spacing + reach: a run far off
// gains no allowance from its own size. Plus n half float32 subnormal spacings per side (the
// partial sums' underflow). For a run in the reference's binade, up to one ULP below the noise
// model's 2 (u_d |g| + eta): u_d |g| is half a ULP only at the bottom of a binade.
double stored_roundings(double ref, double run, double reach, const BoundOptions& o);
// The unit roundoff of a dtype (float32 2^-24, bfloat16 2^-8, float16 2^-11, float64 2^-53).
double unit_roundoff(DType d);
// Element i of a float64, float32 or float16 array, as double (a float64 oracle keeps its digits).
double array_element(const ArrayView& v, std::int64_t i);

struct BoundElement {
  std::int64_t index = -1;
  double ref = 0, run = 0, bound = 0;
  std::optional<double> exact;  // the oracle's value, when one is given
  double over = 0;              // |error| / bound
  std::uint64_t ulp = 0;        // run vs reference, in the case dtype
};

struct BoundResult {
  std::int64_t checked = 0, beyond = 0;
  double max_over = 0;              // largest |error| / bound (passing elements included)
  double max_worst_case_over = 0;   // the same against the worst-case bound
  std::vector<BoundElement> worst;  // failing elements, most over first (at most `keep`)
  std::uint64_t max_failing_ulp = 0;
  bool against_exact = false;       // judged against the oracle
  // With an oracle: failing elements where the reference is nearer the exact value than the run.
  std::int64_t ref_nearer = 0;
};

// Elements where either side is non-finite are left to the non-finite gate. `exact` (float64
// oracle, same element count) switches to the three-way test |run - exact| <= b.
Result<BoundResult> check_bounds(const ArrayView& ref, const ArrayView& run, const ArrayView& scale,
                                 const ArrayView* exact, const BoundOptions& o, std::size_t keep = 5,
                                 int threads = 1);

// The old fixed rtol of the built-in policy, used for a set without scales (made before bounds).
double legacy_rtol(const std::string& dtype, bool gradient);
// The old fixed loss_abs of a bfloat16 / float16 loss, for a set without scales.
double legacy_loss_abs(const std::string& dtype);

// The loss L = mean((y - t)^2), evaluated in float32 by two correct stacks from their own stored
// outputs: how far apart the two values may be (docs/compare.md, "Loss bounds"). `y` is the
// reference output, `scale` its error-bound scale, `target` the target, `o` the output's options
// (lambda, n, dtype, added_after), `loss` the reference loss. With c_i = 2 (y_i - t_i) / N and
// each side's error at y_i split as lambda A_i + D_i (side_parts), the first-order change is a sum
// of independent rounding errors, held to lambda sqrt(2 sum c_i^2 (A_i^2 + D_i^2)) (Hoeffding, both
// sides), the second-order term to mean((2 side_i)^2), and each side's float32 evaluation of L to
// lambda u sqrt(N) L + 2 u L. With o.run_extra (the run's output computed by another algorithm:
// lambda T_i per element, run side only), that error carried into L, loss_algorithm_term, is added
// and the second-order term becomes mean((2 side_i + lambda T_i)^2).
struct LossBound {
  double bound = 0, linear = 0, quadratic = 0, evaluation = 0, algorithm = 0;
};
Result<LossBound> loss_bound(const ArrayView& y, const ArrayView& scale, const ArrayView& target,
                             const BoundOptions& o, double loss);
// The run's output error beyond the direct sum's, e_i = lambda T_i (independent, mean zero, as the
// algorithm terms are built), carried into L = mean((y - t)^2): sqrt(sum c_i^2 e_i^2) to first
// order, c_i = 2 (y_i - t_i) / N, plus mean(e_i^2), its second-order part. 0 without `extra`.
double loss_algorithm_term(const ArrayView& y, const ArrayView& target, const double* extra);

// What the reference's own roundings already put into its stored loss L = mean((y - t)^2), so a
// fixed loss_abs / loss_rel never demands more (docs/compare.md, "The loss floor"): both stored
// losses' half-ULPs in float32 (ulp(L)), the rounding of the reference's mean (u L), and its stored
// output's rounding carried to first order, u_d sum |2 (y_i - t_i) / N| |y_i| with u_d the case
// dtype's unit roundoff. The sum of squares' own roundings are left to the gate (a loss that holds
// 1e-6 sums pairwise or in float64). Needs only the reference output and target.
Result<double> loss_floor(const ArrayView& y, const ArrayView& target, DType dtype, double loss);

// The lowest Pearson correlation with the reference `y` that two correct stacks' storage roundings
// alone can give (docs/compare.md, "min_pcc and the rounding floor"): each side's stored element is
// within r_i / 2 = u_d |y_i| + eta of its own value, so the run is y + e with |e_i| <= r_i, and
// pcc(y, y + e) >= sqrt(1 - sum r_i^2 / sum (y_i - mean y)^2) (the angle between the centred
// vectors, whose sine is at most |e| / |y - mean y|); 0 when the rounding can exceed the spread.
// Non-finite elements are left out. `dtype` is the case dtype (u_d, eta).
double pcc_rounding_floor(const ArrayView& y, DType dtype);

}  // namespace validate::compare
