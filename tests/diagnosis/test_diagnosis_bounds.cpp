// A tensor whose gate is the per-element error bound (DiagnosisInput::bound): the hypotheses judged
// by the element test are held to that bound, element by element at the canonical position, and
// name a cause only when the run as declared fails the same test.
#include <gtest/gtest.h>

#include "diagnosis_fixture.hpp"

namespace {

// A bfloat16 gradient with its error-bound scale, and the values a correct stack may hold instead
// of the reference's: 3% off (more than the 1e-2 relative error that stands in without a bound), and
// within the gate's per-element bound 2 b(ref, rho) with rho = 2 |ref| + 0.25.
struct BoundedGradient {
  Tensor ref, scale, correct;
  BoundOptions options;
};

BoundedGradient bounded_gradient(const Shape& shape, unsigned seed, bool symmetric_in_hw = false) {
  BoundedGradient g;
  Tensor r = random_tensor(shape, seed);
  if (symmetric_in_hw) {  // the same values under a flip of H and W
    const Tensor f = flipped(r, {false, false, true, true});
    for (std::int64_t i = 0; i < r.numel(); ++i) r.set(i, r.get(i) + f.get(i));
  }
  g.ref = Tensor(DType::float32, shape);
  g.scale = Tensor(DType::float32, shape);
  g.correct = Tensor(DType::float32, shape);
  const Tensor sign = random_tensor(shape, seed + 1000);  // symmetric: the same draw at mirrored positions
  const Tensor mirrored = symmetric_in_hw ? flipped(sign, {false, false, true, true}) : sign.clone();
  for (std::int64_t i = 0; i < r.numel(); ++i) {
    const float y = round_to_dtype(r.get(i), DType::bfloat16);
    g.ref.set(i, y);
    g.scale.set(i, 2 * std::fabs(y) + 0.25f);
    const float s = sign.get(i) + mirrored.get(i) >= 0 ? 1.f : -1.f;
    g.correct.set(i, round_to_dtype(y * (1 + 0.03f * s), DType::bfloat16));
  }
  g.options.dtype = DType::bfloat16;
  g.options.gradient = true;
  g.options.n = 64;
  return g;
}

DiagnosisInput bounded_input(const BoundedGradient& g, const Tensor& run, bool with_bound) {
  DiagnosisInput in = input_for(g.ref, run, "NCHW", "grad_input");
  in.logical = DType::bfloat16;
  in.rtol.reset();  // the gate is the bound
  double mx = 0;
  for (std::int64_t i = 0; i < g.ref.numel(); ++i) mx = std::max(mx, std::fabs(g.ref.get(i)));
  in.floor = 0.05 * mx;
  if (with_bound) in.bound = DiagnosisInput::ElementBound{view_of(g.scale), g.options};
  return in;
}

}  // namespace

// The premise, checked: every correct value within its bound, many beyond 1e-2 relative.
TEST(DiagnosisBounds, TheCorrectValuesSitWithinTheBoundAndBeyondOnePercent) {
  const BoundedGradient g = bounded_gradient({2, 3, 4, 5}, 41);
  std::int64_t beyond_one_percent = 0;
  for (std::int64_t i = 0; i < g.ref.numel(); ++i) {
    const double y = g.ref.get(i), x = g.correct.get(i);
    EXPECT_LE(std::fabs(x - y), 2 * side_bound(y, g.scale.get(i), g.options)) << i;
    if (std::fabs(x - y) > 1e-2 * std::fabs(y)) ++beyond_one_percent;
  }
  EXPECT_GT(beyond_one_percent, g.ref.numel() / 2);
}

// Written with H and W flipped: the re-read values are the correct ones, which agree with the
// reference only under the bound. Without it (a set made before scales) the 1e-2 stand-in says no.
TEST(DiagnosisBounds, Bfloat16GradientWrittenFlippedIsNamedUnderItsBound) {
  const BoundedGradient g = bounded_gradient({2, 3, 4, 5}, 41);  // every axis its own size, batch 2
  const Tensor run = flipped(g.correct, {false, false, true, true});
  const Diagnosis dx = diagnose(bounded_input(g, run, true));
  ASSERT_NE(dx.named(), nullptr) << dx.summary;
  EXPECT_EQ(dx.named()->code, "flipped");
  EXPECT_EQ(dx.named()->spec, "NCHW+flip=HW");
  EXPECT_EQ(dx.named()->params["flipped"], "HW");
  EXPECT_TRUE(dx.named()->confirmed_all);
  EXPECT_EQ(dx.named()->checked, g.ref.numel());
  EXPECT_FALSE(dx.ambiguous) << dx.summary;

  const Diagnosis without = diagnose(bounded_input(g, run, false));
  EXPECT_TRUE(without.matches.empty()) << without.summary;
}

// The other re-readings too: H and W exchanged, handed over as the [2,3,5,4] transpose's bytes.
TEST(DiagnosisBounds, Bfloat16GradientWrittenHwSwappedIsNamedUnderItsBound) {
  const BoundedGradient g = bounded_gradient({2, 3, 4, 5}, 43);
  const Tensor run = permuted_bytes(g.correct, {0, 1, 3, 2});
  const Diagnosis dx = diagnose(bounded_input(g, run, true));
  ASSERT_NE(dx.named(), nullptr) << dx.summary;
  EXPECT_EQ(dx.named()->code, "hw_swapped");
  EXPECT_EQ(dx.named()->spec, "NCWH");
}

// The policy's rtol set as well as the bound: an element must pass both, so 3% off fails rtol 1e-2
// and the flip is not named; with rtol 5e-2 it is.
TEST(DiagnosisBounds, AnExplicitRtolAppliesAsWellAsTheBound) {
  const BoundedGradient g = bounded_gradient({2, 3, 4, 5}, 41);
  const Tensor run = flipped(g.correct, {false, false, true, true});
  DiagnosisInput in = bounded_input(g, run, true);
  in.rtol = 1e-2;
  EXPECT_TRUE(diagnose(in).matches.empty());
  in.rtol = 5e-2;
  const Diagnosis dx = diagnose(in);
  ASSERT_NE(dx.named(), nullptr) << dx.summary;
  EXPECT_EQ(dx.named()->code, "flipped");
}

// A reference that is its own H/W flip, and a run that is correct as declared (the gate failed on
// something else, e.g. its PCC): the flipped reading agrees within the bound, but so does the
// declared one, so nothing is named.
TEST(DiagnosisBounds, NothingIsNamedWhenTheDeclaredReadingAgreesToo) {
  const BoundedGradient g = bounded_gradient({2, 3, 4, 5}, 47, true);
  const Diagnosis dx = diagnose(bounded_input(g, g.correct, true));
  EXPECT_TRUE(dx.matches.empty()) << dx.summary;
  EXPECT_NE(dx.summary.find("no hypothesis explains"), std::string::npos) << dx.summary;
  // The flipped reading itself did agree: it is the closest, not a match.
  ASSERT_TRUE(dx.closest);
  EXPECT_EQ(dx.closest->code, "flipped");
}

// The gradient scaled by a wrong loss count: the correct gradient's freedom scales with it.
TEST(DiagnosisBounds, GradientScaledByTheLossCountIsNamedUnderItsBound) {
  const BoundedGradient g = bounded_gradient({2, 3, 4, 5}, 53);
  Tensor run(DType::float32, g.ref.shape());
  for (std::int64_t i = 0; i < run.numel(); ++i) run.set(i, g.correct.get(i) * 256);
  DiagnosisInput in = bounded_input(g, run, true);
  in.input_shapes["output"] = {2, 128};
  const Diagnosis dx = diagnose(in);
  ASSERT_NE(dx.named(), nullptr) << dx.summary;
  EXPECT_EQ(dx.named()->code, "loss_sum");
  EXPECT_TRUE(diagnose(bounded_input(g, run, false)).matches.empty());
}
