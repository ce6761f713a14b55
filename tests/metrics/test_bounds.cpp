// The per-element error bound (bounds.hpp), against values worked out by hand from its formula
// (docs/compare.md, "Error bounds"), and the three-way rule of the oracle.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "validate/metrics/bounds.hpp"

using validate::DType;
using namespace validate::compare;

namespace {

ArrayView view(const std::vector<float>& v) {
  return ArrayView{reinterpret_cast<const std::byte*>(v.data()), DType::float32,
                   static_cast<std::int64_t>(v.size()), false};
}
ArrayView view(const std::vector<double>& v) {
  return ArrayView{reinterpret_cast<const std::byte*>(v.data()), DType::float64,
                   static_cast<std::int64_t>(v.size()), false};
}

}  // namespace

TEST(Bounds, DtypeUlpByHand) {
  EXPECT_EQ(dtype_ulp(1.0, DType::float32), std::ldexp(1.0, -23));
  EXPECT_EQ(dtype_ulp(1.5, DType::bfloat16), std::ldexp(1.0, -7));
  EXPECT_EQ(dtype_ulp(-3.0, DType::bfloat16), std::ldexp(1.0, -6));   // 3 = 1.5 * 2^1
  EXPECT_EQ(dtype_ulp(1000.0, DType::float16), 0.5);                   // 2^9 <= 1000 < 2^10: 2^(9-10)
  EXPECT_EQ(dtype_ulp(1e-9, DType::float16), std::ldexp(1.0, -24));   // subnormal spacing
  EXPECT_EQ(dtype_ulp(0.0, DType::float32), std::ldexp(1.0, -149));
}

TEST(Bounds, SideBoundByHand) {
  // float32 output, n = 16 products, lambda 8, y = 2, rho = 1:
  // 8 (2^-24 * 4 * (2 + 1) + 2^-24 * 1) + 2^-24 * 2 + 2^-150 + 16 * 2^-150
  BoundOptions o;
  o.n = 16;
  const double u = std::ldexp(1.0, -24);
  EXPECT_DOUBLE_EQ(side_bound(2.0, 1.0, o), 8 * (u * 4 * 3 + u) + u * 2 + 17 * std::ldexp(1.0, -150));
  // bfloat16 gradient: dL/dy rounded to bfloat16 contributes lambda * 2^-8 * rho.
  o.dtype = DType::bfloat16;
  o.gradient = true;
  o.n = 100;
  EXPECT_DOUBLE_EQ(side_bound(-0.75, 0.5, o),
                   8 * (u * 10 * 1.25 + std::ldexp(1.0, -8) * 0.5) + std::ldexp(1.0, -8) * 0.75 +
                       std::ldexp(1.0, -134) + 100 * std::ldexp(1.0, -150));
  // The worst case is never below the probabilistic bound's rounding part, and grows like n.
  EXPECT_GT(worst_case_bound(-0.75, 0.5, o), std::ldexp(1.0, -8) * std::sqrt(100.0) * 0.5);
}

// A gradient whose scale is split (S = sqrt(n (u/u_d)^2 rho_a^2 + rho_p^2), bounds.hpp): the
// accumulation term keeps |y| alone, S takes u_p. float32 gradient, n = 100, lambda 8, y = -0.75,
// S = 0.5: 8 (2^-24 * 10 * 0.75 + 2^-24 * 0.5) + 2^-24 * 0.75 + 2^-150 + 100 * 2^-150; the same
// on the vectorized pass (two stacks: twice that), where an error just inside passes and one just
// outside fails.
TEST(Bounds, ASplitGradientScaleTakesTheProductTermAloneByHand) {
  const double u = std::ldexp(1.0, -24);
  BoundOptions o;
  o.gradient = true;
  o.n = 100;
  o.split_gradient = true;
  const double want = 8 * (u * 10 * 0.75 + u * 0.5) + u * 0.75 + 101 * std::ldexp(1.0, -150);
  EXPECT_DOUBLE_EQ(side_bound(-0.75, 0.5, o), want);
  o.split_gradient = false;  // the unsplit scale also enters the accumulation term
  EXPECT_DOUBLE_EQ(side_bound(-0.75, 0.5, o), want + 8 * u * 10 * 0.5);
  o.split_gradient = true;
  // Two stacks: the lambda terms in root-sum-square, the stored roundings once per side.
  const double two = std::sqrt(2.0) * 8 * (u * 10 * 0.75 + u * 0.5) + 2 * (u * 0.75 + 101 * std::ldexp(1.0, -150));
  EXPECT_DOUBLE_EQ(two_stack_bound(-0.75, 0.5, o), two);
  const std::vector<float> ref{-0.75f, -0.75f}, scale{0.5f, 0.5f};
  const std::vector<float> run{static_cast<float>(-0.75 + 0.9 * two), static_cast<float>(-0.75 + 1.1 * two)};
  auto r = check_bounds(view(ref), view(run), view(scale), nullptr, o);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->beyond, 1);
  ASSERT_EQ(r->worst.size(), 1u);
  EXPECT_EQ(r->worst[0].index, 1);
  EXPECT_NEAR(r->worst[0].bound, two, 1e-12 * two);
}

// A bfloat16 gradient with a stored dL/dy choice term Z (docs/compare.md, "dL/dy's rounding,
// stored"): two stacks are held to min(noise model, Z max(1, lambda/8) + sqrt(2) lambda u sqrt(n) |g| +
// half a ULP of each stored value + 2 n 2^-150); a Z above the noise model, negative or NaN changes
// nothing; with an oracle a run farther from exact than the reference must also be within it of the
// reference.
TEST(Bounds, AStoredChoiceTermTightensABfloat16GradientAndNeverLoosensIt) {
  const double u = std::ldexp(1.0, -24), ud = std::ldexp(1.0, -8), eta = std::ldexp(1.0, -134) + 64 * std::ldexp(1.0, -150);
  BoundOptions o;
  o.dtype = DType::bfloat16;
  o.gradient = true;
  o.split_gradient = true;
  o.n = 64;
  // |g| = 0.5, S = 4: noise model sqrt(2) 8 (u 8 0.5 + ud 4) + 2 (ud 0.5 + eta), about 0.185.
  const double noise = std::sqrt(2.0) * 8 * (u * 8 * 0.5 + ud * 4) + 2 * (ud * 0.5 + eta);
  EXPECT_DOUBLE_EQ(two_stack_bound(0.5, 4, o), noise);
  // Every value here lies in [0.5, 1), where bfloat16's spacing is 2^-8: half of it per side.
  const double stored = std::ldexp(1.0, -8) + 2 * 64 * std::ldexp(1.0, -150);
  const double z = static_cast<float>(0.01), tight = z + std::sqrt(2.0) * 8 * u * 8 * 0.5 + stored;  // about 0.0139
  const std::vector<float> ref(5, 0.5f), scale(5, 4.0f);
  const std::vector<float> run{static_cast<float>(0.5 + 0.9 * tight), static_cast<float>(0.5 + 1.2 * tight), 0.6f, 0.6f, 0.6f};
  const std::vector<float> choice{static_cast<float>(z), static_cast<float>(z), static_cast<float>(z), 1.0f, -1.0f};
  const ArrayView cv = view(choice);
  o.choice = &cv;
  auto r = check_bounds(view(ref), view(run), view(scale), nullptr, o, 5);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->beyond, 2);  // element 1 (1.2x) and 2 (0.1 off); 3 and 4 keep the noise model
  EXPECT_EQ(r->worst[0].index, 2);
  EXPECT_NEAR(r->worst[0].bound, tight, 1e-12);
  EXPECT_EQ(r->worst[1].index, 1);
  EXPECT_NEAR(r->worst[1].over, 1.2, 1e-5);  // the run stored as float: 0.5 + x within 3e-8 of it
  o.choice = nullptr;
  auto plain = check_bounds(view(ref), view(run), view(scale), nullptr, o);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->beyond, 0);  // 0.1 is within the noise model's 0.185
  // lambda 16: Z doubles, the rest follows lambda.
  o.choice = &cv;
  o.lambda = 16;
  auto wide = check_bounds(view(ref), view(run), view(scale), nullptr, o);
  ASSERT_TRUE(wide);
  EXPECT_EQ(wide->beyond, 1);  // element 2 only: 0.1 > 2 z + ... = 0.0239
  EXPECT_NEAR(wide->worst[0].bound, 2 * z + std::sqrt(2.0) * 16 * u * 8 * 0.5 + stored, 1e-12);
  // With an oracle: element 2 is farther from exact (0.5) than the reference (exact): it fails
  // against the choice bound; a run nearer the exact value than the reference never does.
  o.lambda = 8;
  const std::vector<double> exact{0.5, 0.5, 0.5, 0.5, 0.5};
  const ArrayView xv = view(exact);
  auto three = check_bounds(view(ref), view(run), view(scale), &xv, o, 5);
  ASSERT_TRUE(three);
  EXPECT_EQ(three->beyond, 2);
  EXPECT_EQ(three->worst[0].index, 2);
  EXPECT_NEAR(three->worst[0].over, 0.1f / tight, 1e-4);
  const std::vector<double> far{0.7, 0.7, 0.7, 0.7, 0.7};  // the reference 0.2 away: every run nearer
  const ArrayView fv = view(far);
  auto nearer = check_bounds(view(ref), view(run), view(scale), &fv, o, 5);
  ASSERT_TRUE(nearer);
  EXPECT_EQ(nearer->beyond, 0);
}

// The run's value may sit Z from the reference's, and it is stored rounded to bfloat16 at its own
// magnitude: on a gradient near zero (reference -3.368e-6, a grad_A of heavy-tailed data) the run's
// rounding, up to half a ULP at 3.7e-5 (2^-23), is 16 times the reference's (2^-27). The choice bound
// carries each side's own half ULP.
TEST(Bounds, AChoiceBoundCoversTheRunsRoundingAtItsOwnMagnitude) {
  const double u = std::ldexp(1.0, -24);
  BoundOptions o;
  o.dtype = DType::bfloat16;
  o.gradient = true;
  o.split_gradient = true;
  o.n = 6;
  const double g = -3.368e-6, z = 4.0e-5;  // g in [2^-19, 2^-18): spacing 2^-26
  // The run's route moves the gradient by exactly Z, to 3.66e-5 in [2^-15, 2^-14) (spacing 2^-22);
  // its stored rounding then moves it by just under half that spacing.
  const double route = g + z, run = route + 0.499 * std::ldexp(1.0, -22);
  const double acc = std::sqrt(2.0) * 8 * u * std::sqrt(6.0) * std::fabs(g);
  ASSERT_GT(run - g, z + acc + std::ldexp(1.0, -26) + 12 * std::ldexp(1.0, -150));  // beyond it with the reference's ULP twice
  const std::vector<float> ref{static_cast<float>(g)}, runv{static_cast<float>(run)}, scale{1.0f}, choice{static_cast<float>(z)};
  const ArrayView cv = view(choice);
  o.choice = &cv;
  auto r = check_bounds(view(ref), view(runv), view(scale), nullptr, o);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->beyond, 0);
  EXPECT_LT(r->max_over, 1.0);
  EXPECT_GT(r->max_over, 0.99);  // the bound is no wider than those terms
  EXPECT_DOUBLE_EQ(stored_roundings(g, run, z + acc, o), std::ldexp(1.0, -27) + std::ldexp(1.0, -23) + 12 * std::ldexp(1.0, -150));
  // A run far off gains nothing from its own size: at 1.0 its half ULP would be 2^-8, but a correct
  // run lies within |g| + 2^-27 + reach of zero, where the spacing is 2^-22.
  EXPECT_DOUBLE_EQ(stored_roundings(g, 1.0, z + acc, o), std::ldexp(1.0, -27) + std::ldexp(1.0, -23) + 12 * std::ldexp(1.0, -150));
}

// Near the top of a binade u_d |g| is almost a whole ULP, so counting each side's stored rounding
// as u_d |g| let a bfloat16 gradient two ULPs off pass. Counted as half a ULP of each stored value,
// with the choice moving it by 0.3 ULP, a correct stack may store the reference's neighbour (one
// ULP) and nothing farther: two ULPs fail.
TEST(Bounds, AChoiceBoundCountsEachStoredRoundingAsHalfAUlp) {
  BoundOptions o;
  o.dtype = DType::bfloat16;
  o.gradient = true;
  o.split_gradient = true;
  o.n = 64;
  const double ulp = std::ldexp(1.0, -13);           // bfloat16's spacing in [2^-6, 2^-5)
  const double g = std::ldexp(1.0, -5) - ulp;         // the binade's largest bfloat16 value
  const std::vector<float> ref(3, static_cast<float>(g)), scale(3, 0.01f);
  const std::vector<float> run{static_cast<float>(g + ulp), static_cast<float>(g - ulp), static_cast<float>(g - 2 * ulp)};
  const std::vector<float> choice(3, static_cast<float>(0.3 * ulp));
  const ArrayView cv = view(choice);
  o.choice = &cv;
  auto r = check_bounds(view(ref), view(run), view(scale), nullptr, o, 5);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->beyond, 1);
  EXPECT_EQ(r->worst[0].index, 2);
  // 0.3 ULP + half a ULP each side (g + ulp = 2^-5 has twice the spacing, but a correct run lies
  // within 0.8 ULP of g, below 2^-5) + sqrt(2) 8 u 8 |g|: about 1.3 ULP.
  const double acc = std::sqrt(2.0) * 8 * std::ldexp(1.0, -24) * 8 * g;
  const double z = static_cast<float>(0.3 * ulp);  // as stored
  EXPECT_NEAR(r->worst[0].bound, z + ulp + acc + 128 * std::ldexp(1.0, -150), 1e-12 * ulp);
  // The same element under the noise model's stored roundings, 2 u_d |g| = 1.99 ULP, passed it.
  EXPECT_GT(0.3 * ulp + acc + 2 * std::ldexp(1.0, -8) * g, 2 * ulp);
}

// A split gradient scale S = sqrt(n (u/u_d)^2 rho_a^2 + rho_p^2) already carries sqrt(n) of its
// accumulated products: their sum |a_i b_i| is at most min(sqrt(n) (1 + u_d), u_d / u) S, S itself
// in float32. sqrt(n) S made the float32 worst case 32x too wide at n = 1024, wide enough to call a
// dL/dy rounded to 8 bits "within the worst case of rounding".
TEST(Bounds, ASplitGradientsWorstCaseCountsItsAccumulatedProductsOnce) {
  const double u = std::ldexp(1.0, -24);
  BoundOptions o;
  o.gradient = true;
  o.split_gradient = true;
  o.n = 1024;
  const double gamma = 1024 * u / (1 - 1024 * u), y = 0.5, s = 2;
  const double eta32 = worst_case_bound(0, 0, o);  // the underflow term alone
  EXPECT_NEAR(worst_case_bound(y, s, o), gamma * (y + s) + u * 32 * s + u * y + eta32, 1e-22);
  o.dtype = DType::bfloat16;
  const double ud = std::ldexp(1.0, -8), eta16 = worst_case_bound(0, 0, o);
  EXPECT_NEAR(worst_case_bound(y, s, o), gamma * (y + 32 * (1 + ud) * s) + ud * 32 * s + ud * y + eta16, 1e-15);
  o.split_gradient = false;  // an output's (or an unsplit gradient's) rho: sqrt(n) rho
  o.dtype = DType::float32;
  EXPECT_NEAR(worst_case_bound(y, s, o), gamma * (y + 32 * s) + u * 32 * s + u * y + eta32, 1e-22);
}

TEST(Bounds, TheFailingElementOfALargeBfloat16GradientPassesItsBound) {
  // A bfloat16 grad_weight element summed over n = 2048 * 9 products whose cancellation leaves
  // -5.6e-4: reference -5.379e-4 (dL/dy rounded first), run -5.646e-4, exact -5.627e-4. With the
  // products' root-sum-square rho = 2e-3, lambda * u_d * rho = 6.25e-5 per side covers the
  // reference's 2.5e-5 error; the fixed rtol 4e-2 on a 5% floor of max|ref| did not.
  BoundOptions o;
  o.dtype = DType::bfloat16;
  o.gradient = true;
  o.n = 2048 * 9;
  std::vector<float> ref{-5.379e-4f, 0.25f}, run{-5.646e-4f, 0.25f}, rho{2e-3f, 0.3f};
  auto r = check_bounds(view(ref), view(run), view(rho), nullptr, o);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->beyond, 0);
  EXPECT_EQ(r->checked, 2);
  EXPECT_LT(r->max_over, 1.0);
  // Against the exact value, the run (1.9e-6 away) passes and its ratio is small.
  std::vector<double> exact{-5.627e-4, 0.25};
  const ArrayView xv = view(exact);
  auto t = check_bounds(view(ref), view(run), view(rho), &xv, o);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->beyond, 0);
  EXPECT_TRUE(t->against_exact);
}

TEST(Bounds, AFailingElementIsNamedWithItsDistances) {
  // float32 output, n = 9, rho = |y|: the per-side bound is 8 * 2^-24 * (3 * 2 + 1) * |y| + ulp/2,
  // about 3.4e-6 |y|; element 2 is 1e-4 relative off (TF32-sized), element 0 exact.
  BoundOptions o;
  o.n = 9;
  std::vector<float> ref{1.0f, -2.0f, 3.0f, 0.5f}, run{1.0f, -2.0f, 3.0003f, 0.5f}, rho{1, 2, 3, 0.5f};
  auto r = check_bounds(view(ref), view(run), view(rho), nullptr, o);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->beyond, 1);
  ASSERT_EQ(r->worst.size(), 1u);
  const BoundElement& el = r->worst[0];
  EXPECT_EQ(el.index, 2);
  EXPECT_FLOAT_EQ(static_cast<float>(el.run), 3.0003f);
  const double two = two_stack_bound(3.0, 3.0, o);
  EXPECT_DOUBLE_EQ(el.bound, two);
  EXPECT_NEAR(el.over, std::fabs(3.0003f - 3.0) / two, 1e-9);
  EXPECT_GT(el.over, 10);
}

TEST(Bounds, ARunAtLeastAsCloseToExactAsTheReferenceNeverFails) {
  // The reference is far from exact (beyond any bound); the run is as far on the other side: it
  // passes against the oracle. A run further from exact than both fails, with both distances.
  BoundOptions o;
  o.n = 4;
  std::vector<float> ref{1.001f, 1.001f}, run{0.999f, 1.01f}, rho{1, 1};
  std::vector<double> exact{1.0, 1.0};
  const ArrayView xv = view(exact);
  auto r = check_bounds(view(ref), view(run), view(rho), &xv, o);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->beyond, 1);
  ASSERT_EQ(r->worst.size(), 1u);
  EXPECT_EQ(r->worst[0].index, 1);
  ASSERT_TRUE(r->worst[0].exact);
  EXPECT_EQ(r->ref_nearer, 1);
  // Without the oracle the first element fails too: the two sides differ by 2e-3.
  auto two = check_bounds(view(ref), view(run), view(rho), nullptr, o);
  ASSERT_TRUE(two);
  EXPECT_EQ(two->beyond, 2);
}

TEST(Bounds, ANanExactValueFailsItsElement) {
  // Both sides agree exactly; the oracle has NaN at one element: that element has no exact value to
  // be within, so it fails instead of being left out (an oracle of NaNs checked nothing and passed).
  BoundOptions o;
  o.n = 4;
  std::vector<float> ref{1, 2, 3}, run{1, 2, 3}, rho{1, 1, 1};
  std::vector<double> exact{1, std::nan(""), 3};
  const ArrayView xv = view(exact);
  auto r = check_bounds(view(ref), view(run), view(rho), &xv, o);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->checked, 3);
  EXPECT_EQ(r->beyond, 1);
  ASSERT_EQ(r->worst.size(), 1u);
  EXPECT_EQ(r->worst[0].index, 1);
  EXPECT_TRUE(std::isinf(r->max_over));
}

TEST(Bounds, NonFiniteElementsAreLeftToTheirOwnGate) {
  BoundOptions o;
  std::vector<float> ref{NAN, 1.0f}, run{1.0f, 1.0f}, rho{1, 1};
  auto r = check_bounds(view(ref), view(run), view(rho), nullptr, o);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->checked, 1);
  EXPECT_EQ(r->beyond, 0);
  std::vector<float> shorter{1.0f};
  EXPECT_FALSE(check_bounds(view(ref), view(run), view(shorter), nullptr, o));
}

TEST(Bounds, APerLambdaScaleIsTheBoundItself) {
  // A training checkpoint's scale (docs/training.md, "Checkpoint bounds"): one side's bound is
  // lambda * scale, nothing added for the dtype or the reduction. lambda 8, scale 1e-3: two stacks
  // may differ by 1.6e-2, a run by 8e-3 from exact (or as far as the reference is).
  BoundOptions o;
  o.dtype = DType::bfloat16;
  o.per_lambda = true;
  o.n = 1e6;  // ignored
  EXPECT_DOUBLE_EQ(side_bound(5.0, 1e-3, o), 8e-3);
  std::vector<float> ref{1.0f, 1.0f, 0.0f}, run{1.0155f, 1.0165f, 0.0f}, scale{1e-3f, 1e-3f, 0.0f};
  auto r = check_bounds(view(ref), view(run), view(scale), nullptr, o);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->beyond, 1);  // 0.0165 > 0.016; 0.0155 passes; a zero scale holds an exact element
  ASSERT_EQ(r->worst.size(), 1u);
  EXPECT_EQ(r->worst[0].index, 1);
  EXPECT_NEAR(r->worst[0].bound, 1.6e-2, 1e-9);
  std::vector<double> exact{1.0, 1.01, 0.0};
  const ArrayView xv = view(exact);
  auto t = check_bounds(view(ref), view(run), view(scale), &xv, o);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->beyond, 1);  // |1.0155 - 1| = 0.0155 > max(8e-3, 0); |1.0165 - 1.01| = 0.0065 passes
  EXPECT_EQ(t->worst[0].index, 0);
}

TEST(Bounds, ABiasAddedAfterTheSumAddsOneRoundingOfTheSum) {
  // bfloat16 output of a conv with bias, max |bias| = 0.5, y = 0.25, rho = 1, n = 10: the sum
  // s = y - bias may be stored in bfloat16 before the bias is added (cuDNN's AddTensor, LibTorch
  // on CUDA), one more rounding u_d |s| <= u_d (|y| + 0.5), on top of the result's own u_d |y|.
  BoundOptions o;
  o.dtype = DType::bfloat16;
  o.n = 10;
  const double u = std::ldexp(1.0, -24), ud = std::ldexp(1.0, -8), eta = std::ldexp(1.0, -134) + 10 * std::ldexp(1.0, -150);
  const double lam = 8 * (u * std::sqrt(10.0) * 1.25 + u * 1);
  EXPECT_DOUBLE_EQ(side_bound(0.25, 1.0, o), lam + ud * 0.25 + eta);
  o.added_after = 0.5;
  EXPECT_DOUBLE_EQ(side_bound(0.25, 1.0, o), lam + ud * 0.25 + ud * (0.25 + 0.5) + eta);
  const SideParts p = side_parts(0.25, 1.0, o);
  EXPECT_DOUBLE_EQ(p.statistical * 8 + p.deterministic, side_bound(0.25, 1.0, o));
  // The pass over arrays uses the same bound: an element 0.9 of a bias rounding off passes with the
  // bias term and fails without it (the H200's bfloat16 conv outputs: ref -3.3e-4, run 0).
  const std::vector<float> ref{-3.319e-4f}, run{0.0f}, scale{0.05f};
  o.n = 73;
  o.added_after = 0;
  EXPECT_EQ(check_bounds(view(ref), view(run), view(scale), nullptr, o)->beyond, 1);
  o.added_after = 0.2;  // |s| = |y - b| up to 0.2: its bfloat16 rounding is up to 7.8e-4
  EXPECT_EQ(check_bounds(view(ref), view(run), view(scale), nullptr, o)->beyond, 0);
}

// A stored bias-after term W (BoundOptions::after; docs/compare.md, "The bias added after the sum,
// stored") replaces the blanket u_d (|y| + max |bias|): two stacks are held to max(the fused
// route's bound, W), with an oracle a run farther from exact than the reference to
// max(one side's bound, W + |ref - exact|); a W that is NaN or negative raises nothing, and none
// raises the bound above the blanket term's (a stored term never loosens the gate). 20 elements:
// the vector pass (bound_fast) and the scalar one (bound_pass) both decide some.
TEST(Bounds, AStoredBiasAfterTermHoldsThatRouteInsteadOfTheBlanketTerm) {
  const double u = std::ldexp(1.0, -24), ud = std::ldexp(1.0, -8), eta = std::ldexp(1.0, -134) + 10 * std::ldexp(1.0, -150);
  BoundOptions o;
  o.dtype = DType::bfloat16;
  o.n = 10;
  o.added_after = 0.5;
  const double y = 0.25, step = std::ldexp(1.0, -9);  // bfloat16's spacing at 0.25
  const double fused = std::sqrt(2.0) * 8 * (u * std::sqrt(10.0) * (y + 1) + u * 1) + 2 * (ud * y + eta);  // ~1.96e-3
  const double blanket = std::sqrt(2.0) * 8 * (u * std::sqrt(10.0) * (y + 1) + u * 1) + 2 * (2 * ud * y + ud * 0.5 + eta);
  EXPECT_DOUBLE_EQ(two_stack_bound(y, 1, o), blanket);  // ~7.8e-3: four ULPs pass it
  const std::size_t n = 20;
  std::vector<float> ref(n, static_cast<float>(y)), scale(n, 1.0f), run(n), w(n, 0.0f);
  // Every element one ULP off but for 1 and 2 (two ULPs) and 5 (five); W = two ULPs at 2 (that
  // route's move), NaN at 3 and -1 at 4 (both one ULP off: the fused bound still passes them), 1.0
  // at 5 (capped at the blanket bound, which five ULPs exceed).
  for (std::size_t i = 0; i < n; ++i) run[i] = static_cast<float>(y + (i == 1 || i == 2 ? 2 : i == 5 ? 5 : 1) * step);
  w[2] = static_cast<float>(2 * step), w[3] = NAN, w[4] = -1.0f, w[5] = 1.0f;
  const ArrayView wv = view(w);
  o.after = &wv;
  EXPECT_DOUBLE_EQ(two_stack_bound(y, 1, o), fused);  // the blanket term is gone
  EXPECT_DOUBLE_EQ(two_stack_bound_at(y, 1, o, 2, y), 2 * step);
  EXPECT_DOUBLE_EQ(two_stack_bound_at(y, 1, o, 3, y), fused);
  EXPECT_DOUBLE_EQ(after_term(o, 4), 0.0);
  EXPECT_DOUBLE_EQ(two_stack_bound_at(y, 1, o, 5, y), blanket);
  auto r = check_bounds(view(ref), view(run), view(scale), nullptr, o, 5);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->beyond, 2);  // element 1: two ULPs where neither route moves the output; 5
  EXPECT_EQ(r->worst[0].index, 1);
  EXPECT_NEAR(r->worst[0].bound, fused, 1e-15);
  EXPECT_EQ(r->worst[1].index, 5);
  EXPECT_NEAR(r->worst[1].bound, blanket, 1e-15);
  // Without elements 1 and 5 every chunk passes in the vector pass, element 2 by its W alone.
  run[1] = run[5] = static_cast<float>(y + step);
  auto fast = check_bounds(view(ref), view(run), view(scale), nullptr, o, 5);
  ASSERT_TRUE(fast);
  EXPECT_EQ(fast->beyond, 0);
  EXPECT_NEAR(fast->max_over, 1.0, 1e-12);  // element 2 sits on its W
  o.after = nullptr;
  run[1] = static_cast<float>(y + 2 * step);
  run[5] = static_cast<float>(y + 5 * step);
  EXPECT_EQ(check_bounds(view(ref), view(run), view(scale), nullptr, o)->beyond, 1);  // 5 fails the blanket too
  run[5] = static_cast<float>(y + step);
  EXPECT_EQ(check_bounds(view(ref), view(run), view(scale), nullptr, o)->beyond, 0);  // the blanket passes it
  // With an oracle 1e-4 above the reference and the run on the reference elsewhere: element 2 (two
  // ULPs - 1e-4 from exact) passes on W + |ref - exact| (capped at that route's one-side bound,
  // 3.9e-3), element 1 does not (one side's bound is u_d |y| = 9.8e-4 and its statistical part).
  o.after = &wv;
  const std::vector<double> exact(n, y + 1e-4);
  const ArrayView xv = view(exact);
  for (std::size_t i = 0; i < n; ++i) run[i] = i == 1 || i == 2 ? run[i] : static_cast<float>(y);
  auto three = check_bounds(view(ref), view(run), view(scale), &xv, o, 5);
  ASSERT_TRUE(three);
  ASSERT_EQ(three->beyond, 1);
  EXPECT_EQ(three->worst[0].index, 1);
}

TEST(Bounds, TF32OperandsWidenTheProductTerm) {
  // operand_u = 2^-11: each product errs by up to 2 u_t + u_t^2 more; a gradient counts it twice
  // (its own operands, and dL/dy carrying the forward's error).
  BoundOptions o;
  o.n = 4;
  const double u = std::ldexp(1.0, -24), ut = std::ldexp(1.0, -11), op = 2 * ut + ut * ut;
  const double eta = std::ldexp(1.0, -150) + 4 * std::ldexp(1.0, -150);
  o.operand_u = ut;
  EXPECT_DOUBLE_EQ(side_bound(1.0, 2.0, o), 8 * (u * 2 * 3 + (u + op) * 2) + u * 1 + eta);
  o.gradient = true;
  EXPECT_DOUBLE_EQ(side_bound(1.0, 2.0, o), 8 * (u * 2 * 3 + (u + 2 * op) * 2) + u * 1 + eta);
}

TEST(Bounds, LossBoundByHand) {
  // Two bfloat16 outputs y = (1, -2), scales (0.5, 1), targets (0, 0), n = 4, no bias, L = 2.5:
  //   A_i = u sqrt(4) (|y_i| + rho_i) + u rho_i, D_i = u_d |y_i| + eta, side_i = 8 A_i + D_i,
  //   c_i = 2 y_i / 2 = y_i; linear 8 sqrt(2 sum c_i^2 (A_i^2 + D_i^2)); quadratic mean (2 side_i)^2;
  //   evaluation 2 (8 u sqrt(2) L + 2 u L).
  const double u = std::ldexp(1.0, -24), ud = std::ldexp(1.0, -8), eta = std::ldexp(1.0, -134) + 4 * std::ldexp(1.0, -150);
  const double y[2] = {1, -2}, rho[2] = {0.5, 1};
  double lin2 = 0, quad = 0;
  for (int i = 0; i < 2; ++i) {
    const double a = u * 2 * (std::fabs(y[i]) + rho[i]) + u * rho[i], d = ud * std::fabs(y[i]) + eta;
    lin2 += y[i] * y[i] * (a * a + d * d);
    quad += 4 * (8 * a + d) * (8 * a + d);
  }
  const double want = 8 * std::sqrt(2 * lin2) + quad / 2 + 2 * (8 * u * std::sqrt(2.0) * 2.5 + 2 * u * 2.5);
  const std::vector<float> yv{1, -2}, sv{0.5f, 1}, tv{0, 0};
  BoundOptions o;
  o.dtype = DType::bfloat16;
  o.n = 4;
  auto b = loss_bound(view(yv), view(sv), view(tv), o, 2.5);
  ASSERT_TRUE(b) << b.message();
  EXPECT_NEAR(b->bound, want, 1e-15);
  EXPECT_NEAR(b->linear, 8 * std::sqrt(2 * lin2), 1e-15);
  // About 8 sqrt(2) * u_d * sqrt(1 + 16): the outputs' storage roundings dominate.
  EXPECT_NEAR(b->linear, 8 * std::sqrt(2.0) * ud * std::sqrt(17.0), 1e-6);
  const std::vector<float> short_t{0};
  EXPECT_FALSE(loss_bound(view(yv), view(sv), view(short_t), o, 2.5));
}

// A set's float16 scale (value * 2^unit_log2, docs/formats.md "scales") gates exactly as the
// float32 scale of the same values: the same elements checked and beyond, the same worst elements
// and ratios, on both the vectorized pass and the per-element one that names failures, over
// several chunks; and the loss bound alike.
TEST(Bounds, AFloat16ScaleWithItsUnitGatesAsTheSameFloat32Scale) {
  const std::size_t n = 700001;  // three chunks of 2^18, the last partial
  std::vector<float> ref(n), run(n), s32(n);
  std::vector<std::uint16_t> s16(n);
  std::uint32_t state = 7;
  auto next = [&] { return (state = state * 1664525u + 1013904223u) >> 8; };
  const double unit = std::ldexp(1.0, -20);
  for (std::size_t i = 0; i < n; ++i) {
    ref[i] = static_cast<float>(static_cast<double>(next()) / 16777216.0 - 0.5);
    s16[i] = static_cast<std::uint16_t>(0x3c00u + next() % 0x2000u);  // float16 in [1, 16)
    s32[i] = static_cast<float>(validate::float16_bits_to_float(s16[i]) * unit);
    run[i] = ref[i] + static_cast<float>(1e-7 * (static_cast<double>(next()) / 16777216.0 - 0.5));
  }
  for (std::size_t i : {3ul, 300000ul, 699999ul}) run[i] = ref[i] + 1e-2f;  // beyond
  const ArrayView half{reinterpret_cast<const std::byte*>(s16.data()), DType::float16, static_cast<std::int64_t>(n), false};
  BoundOptions o;
  o.dtype = DType::bfloat16;
  o.gradient = true;
  o.n = 64;
  auto a = check_bounds(view(ref), view(run), view(s32), nullptr, o, 5, 2);
  o.scale_unit = unit;
  auto b = check_bounds(view(ref), view(run), half, nullptr, o, 5, 2);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->checked, static_cast<std::int64_t>(n));
  EXPECT_EQ(a->beyond, 3);
  EXPECT_EQ(b->checked, a->checked);
  EXPECT_EQ(b->beyond, a->beyond);
  EXPECT_EQ(b->max_over, a->max_over);
  EXPECT_EQ(b->max_worst_case_over, a->max_worst_case_over);
  ASSERT_EQ(b->worst.size(), a->worst.size());
  for (std::size_t i = 0; i < a->worst.size(); ++i) {
    EXPECT_EQ(b->worst[i].index, a->worst[i].index);
    EXPECT_EQ(b->worst[i].bound, a->worst[i].bound);
  }
  std::vector<float> target(n, 0.25f);
  o.scale_unit = 1;
  auto la = loss_bound(view(ref), view(s32), view(target), o, 0.1);
  o.scale_unit = unit;
  auto lb = loss_bound(view(ref), half, view(target), o, 0.1);
  ASSERT_TRUE(la && lb);
  EXPECT_EQ(lb->bound, la->bound);
}

// loss_floor: ulp_f32(L) + u L + u_d sum |2 (y_i - t_i) / N| |y_i|, by hand.
TEST(Bounds, LossFloorByHand) {
  const std::vector<float> y{300, -200, 100, 50}, t{0, 0, 0, 50};
  // L = (90000 + 40000 + 10000 + 0) / 4 = 35000; ulp_f32(35000) = 2^(15 - 23) = 2^-8.
  // carried: (2 * 300 * 300 + 2 * 200 * 200 + 2 * 100 * 100 + 0) / 4 = 70000.
  const double u = std::ldexp(1.0, -24);
  auto f32 = loss_floor(view(y), view(t), DType::float32, 35000);
  ASSERT_TRUE(f32) << f32.message();
  EXPECT_NEAR(*f32, std::ldexp(1.0, -8) + u * 35000 + u * 70000, 1e-12);  // 0.0102: 1e4 x 1e-6
  auto bf16 = loss_floor(view(y), view(t), DType::bfloat16, 35000);
  ASSERT_TRUE(bf16) << bf16.message();
  EXPECT_NEAR(*bf16, std::ldexp(1.0, -8) + u * 35000 + std::ldexp(1.0, -8) * 70000, 1e-9);
  // On a default-sweep-like loss of 1.5 (four terms of 1.5 against a zero target) it stays below
  // the 1e-6 contract: 2^-23 + 1.5 u + 3 u = 3.9e-7.
  const std::vector<float> y2{1.2247449f, -1.2247449f, 1.2247449f, -1.2247449f}, t2{0, 0, 0, 0};
  auto small = loss_floor(view(y2), view(t2), DType::float32, 1.5);
  ASSERT_TRUE(small);
  EXPECT_LT(*small, 1e-6);
  EXPECT_NEAR(*small, std::ldexp(1.0, -23) + 4.5 * u, 1e-12);
  const std::vector<float> short_t{0};
  EXPECT_FALSE(loss_floor(view(y), view(short_t), DType::float32, 1.0));
}

// pcc_rounding_floor: sqrt(1 - sum (2 u_d |y_i|)^2 / sum (y_i - mean)^2), by hand.
TEST(Bounds, PccRoundingFloorByHand) {
  // y = 100..103: spread 2.25 + 0.25 + 0.25 + 2.25 = 5; bfloat16 r_i = y_i / 128:
  // sum r^2 = 41214 / 16384 = 2.5155, floor sqrt(1 - 2.5155 / 5) = 0.7049.
  const std::vector<float> offset{100, 101, 102, 103};
  EXPECT_NEAR(pcc_rounding_floor(view(offset), DType::bfloat16), std::sqrt(1 - 41214.0 / 16384 / 5), 1e-9);
  // float32: r_i = 2^-23 y_i, 1 - floor = 5.9e-11: never below a float32 min_pcc.
  EXPECT_NEAR(1 - pcc_rounding_floor(view(offset), DType::float32), 0.5 * 41214 * std::ldexp(1.0, -46) / 5, 1e-15);
  // Zero-mean data: sum r^2 = 5 * 2^-14, floor 0.99997, above bfloat16's 0.999: the gate is unchanged.
  const std::vector<float> centred{-1.5f, -0.5f, 0.5f, 1.5f};
  EXPECT_NEAR(pcc_rounding_floor(view(centred), DType::bfloat16), std::sqrt(1 - std::ldexp(1.0, -14)), 1e-12);
  EXPECT_GT(pcc_rounding_floor(view(centred), DType::bfloat16), 0.999);
  // Rounding larger than the spread (a constant tensor): pcc says nothing, floor 0.
  const std::vector<float> flat{7, 7, 7};
  EXPECT_EQ(pcc_rounding_floor(view(flat), DType::bfloat16), 0.0);
}
