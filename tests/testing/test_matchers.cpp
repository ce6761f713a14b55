// validate::testing::UlpNear / AllClose: a pass, failures whose text carries compare's worst
// element (coordinates and both values) and diagnosis, shape mismatches, and the H<->W swap of a
// square tensor that no shape check can see. Failures are captured from real EXPECT_THAT calls,
// so what is asserted is what a user's test log shows.
#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

#include "validate/testing/matchers.hpp"

using namespace validate;
using ::testing::HasSubstr;
using ::testing::Not;
using validate::testing::AllClose;
using validate::testing::UlpNear;

namespace {

// Values in [1, 2): all above the near-zero floor (1% of max|ref|) and all distinct, so every
// element is judged by ULP and any axis permutation moves values.
Tensor ramp(const Shape& shape) {
  Tensor t(DType::float32, shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, 1.0 + static_cast<double>(i) / 1024.0);
  return t;
}

float ulps_up(float x, int n) {
  for (int i = 0; i < n; ++i) x = std::nextafter(x, 2.0f * x + 1.0f);
  return x;
}

// The messages of every failure an EXPECT_* inside `body` reported (and kept from the real test).
std::string failures_of(const std::function<void()>& body) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter capture(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    body();
  }
  std::string text;
  for (int i = 0; i < results.size(); ++i) text += results.GetTestPartResult(i).message();
  return text;
}

}  // namespace

TEST(Matchers, PassesWithinTheUlpBudgetAndFailsOneUlpBelowIt) {
  const Tensor ref = ramp({2, 3, 4, 5});
  Tensor run = ref.clone();
  // Element (n=1, c=2, h=3, w=4) = flat 119, moved by exactly 4 float32 ULPs.
  run.data<float>()[119] = ulps_up(ref.data<float>()[119], 4);
  EXPECT_THAT(run, UlpNear(ref, 4));
  EXPECT_THAT(run, AllClose(ref, 1e-3, 0));
  EXPECT_THAT(run, Not(UlpNear(ref, 3)));

  const std::string text = failures_of([&] { EXPECT_THAT(run, UlpNear(ref, 3).WithAxes("NCHW")); });
  EXPECT_THAT(text, HasSubstr("Expected: is within 3 ULP of the reference [2, 3, 4, 5]"));
  EXPECT_THAT(text, HasSubstr("Actual: float32 [2, 3, 4, 5]"));
  EXPECT_THAT(
      text, HasSubstr("1 of 120 elements beyond tolerance (max_ulp 3); worst at n=1 c=2 h=3 w=4"));
  EXPECT_THAT(text, HasSubstr("max ULP 4 > 3 at n=1 c=2 h=3 w=4"));
}

TEST(Matchers, FailureNamesTheWorstElementBothValuesAndTheTolerancesThatWouldPass) {
  Tensor ref(DType::float32, {2, 3, 4, 5});
  for (std::int64_t i = 0; i < ref.numel(); ++i) ref.set(i, 1.0);
  ref.set(119, 1.5);  // flat 119 = n=1 c=2 h=3 w=4
  Tensor run = ref.clone();
  run.set(119, 2.25);           // abs error 0.75, relative 0.5
  run.set(7, 1.0 + 1.0 / 256);  // a second, smaller offender (flat 7 = n=0 c=0 h=1 w=2)

  // 1.5 -> 2.0 is 2^22 float32 ULPs, 2.0 -> 2.25 another 2^20.
  const std::string expected =
      "2 of 120 elements beyond tolerance (atol 0.001 or rtol 0.001); worst at n=1 c=2 h=3 w=4: "
      "ref 1.5, run 2.25 (abs err 0.75, 5242880 ULP); would pass with atol >= 0.75 or rtol >= 0.5";
  const std::string named =
      failures_of([&] { EXPECT_THAT(run, AllClose(ref, 1e-3, 1e-3).WithAxes("NCHW")); });
  EXPECT_THAT(named, HasSubstr(expected));
  // No layout mistake turns 2.25 into 1.5: the diagnosis must not claim one.
  EXPECT_THAT(named, Not(HasSubstr("equals reference")));

  // Without axes the coordinates are positional, the numbers the same.
  const std::string positional = failures_of([&] { EXPECT_THAT(run, AllClose(ref, 1e-3, 1e-3)); });
  EXPECT_THAT(positional,
              HasSubstr("worst at [0]=1 [1]=2 [2]=3 [3]=4: ref 1.5, run 2.25 (abs err 0.75"));
}

TEST(Matchers, NanWhereTheReferenceIsFiniteFailsEvenWithAHugeTolerance) {
  const Tensor ref = ramp({3, 4});
  Tensor run = ref.clone();
  run.set(6, std::nan(""));  // [1][2]
  const std::string text =
      failures_of([&] { EXPECT_THAT(run, AllClose(ref, 1e30, 0).WithAxes("MK")); });
  EXPECT_THAT(text, HasSubstr("1 NaN/Inf position mismatch (first at m=1 k=2: ref 1.01, run nan)"));
}

TEST(Matchers, ShapeMismatchFailsEvenWithTheSameElementCount) {
  const Tensor ref = ramp({2, 3});
  Tensor same_bytes = ref.clone();
  same_bytes.reshape({3, 2});  // identical memory, wrong shape: a [3,2] result is not a [2,3] one
  const std::string text = failures_of([&] { EXPECT_THAT(same_bytes, UlpNear(ref, 1000)); });
  EXPECT_THAT(text, HasSubstr("shape mismatch: run is [3, 2], reference [2, 3]"));
  EXPECT_THAT(same_bytes, Not(AllClose(ref, 1e30, 1e30)));

  // The transpose has a permuted shape: the diagnosis names it, as `validate compare` does.
  Tensor transposed(DType::float32, {3, 2});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) transposed.set(j * 2 + i, ref.get(i * 3 + j));
  const std::string t = failures_of([&] { EXPECT_THAT(transposed, UlpNear(ref, 0)); });
  EXPECT_THAT(t, HasSubstr("shape mismatch: run is [3, 2], reference [2, 3]"));
  EXPECT_THAT(
      t, HasSubstr("diagnosis: the run equals reference with M and K swapped (its bytes are KM)"));
  EXPECT_THAT(t, HasSubstr("(axes assumed MK; name them with .WithAxes())"));
}

TEST(Matchers, HeightWidthSwapOfASquareTensorIsNamed) {
  // [1, 2, 4, 4]: H == W, so the swapped tensor has the reference's shape and only values tell.
  const Tensor ref = ramp({1, 2, 4, 4});
  Tensor run(DType::float32, ref.shape());
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 4; ++h)
      for (int w = 0; w < 4; ++w) run.set((c * 4 + h) * 4 + w, ref.get((c * 4 + w) * 4 + h));

  // The worst element, found independently: the largest |run - ref|, first on ties.
  std::int64_t worst = 0;
  for (std::int64_t i = 0; i < ref.numel(); ++i)
    if (std::fabs(run.get(i) - ref.get(i)) > std::fabs(run.get(worst) - ref.get(worst))) worst = i;
  const std::string coords = "o=0 i=" + std::to_string(worst / 16) +
                             " h=" + std::to_string(worst / 4 % 4) +
                             " w=" + std::to_string(worst % 4);
  ASSERT_EQ(coords, "o=0 i=0 h=0 w=3");  // (0,3) <- (3,0): the largest offset, 9 steps of 1/1024

  const std::string named =
      failures_of([&] { EXPECT_THAT(run, UlpNear(ref, 4).WithAxes("OIHW")); });
  EXPECT_THAT(named, HasSubstr("worst at " + coords + ": ref 1, run 1.01"));
  EXPECT_THAT(
      named,
      HasSubstr("diagnosis: the run equals reference with H and W swapped (its bytes are OIWH)"));
  EXPECT_THAT(named, HasSubstr("which the shape of a square tensor cannot show"));
  EXPECT_THAT(named, Not(HasSubstr("axes assumed")));

  // Without .WithAxes a 4-d tensor is diagnosed as NCHW, and the message says it assumed so.
  const std::string inferred = failures_of([&] { EXPECT_THAT(run, UlpNear(ref, 4)); });
  EXPECT_THAT(
      inferred,
      HasSubstr("diagnosis: the run equals reference with H and W swapped (its bytes are NCWH)"));
  EXPECT_THAT(inferred, HasSubstr("(axes assumed NCHW; name them with .WithAxes())"));
}

TEST(Matchers, AxesThatDoNotFitTheReferenceAreAnError) {
  const Tensor ref = ramp({2, 3});
  const std::string text = failures_of([&] { EXPECT_THAT(ref, UlpNear(ref, 0).WithAxes("NCHW")); });
  EXPECT_THAT(text, HasSubstr("WithAxes(\"NCHW\") names 4 axes but the reference [2, 3] has 2"));
}

// A tensor compared in a C++ test is no program's file: the advice names the tensor (Named) or "the
// tensor under test", never the exec protocol's "<tensor>.bin". Every axis a different size, batch
// 2, so the only mistake that explains the values is the H/W loop order.
TEST(Matchers, TheAdviceNamesTheComparedTensorNotAFile) {
  const Tensor ref = ramp({2, 3, 4, 5});
  // Written with the W loop outside the H loop: the bytes are NCWH under an NCHW label.
  Tensor run(DType::float32, ref.shape());
  for (int nc = 0; nc < 6; ++nc)
    for (int h = 0; h < 4; ++h)
      for (int w = 0; w < 5; ++w) run.set((nc * 5 + w) * 4 + h, ref.get((nc * 4 + h) * 5 + w));
  const std::string unnamed = failures_of([&] { EXPECT_THAT(run, UlpNear(ref, 4).WithAxes("NCHW")); });
  EXPECT_THAT(unnamed, HasSubstr("diagnosis: the run equals reference with H and W swapped (its bytes are NCWH)"));
  EXPECT_THAT(unnamed, HasSubstr("where you write the tensor under test"));
  EXPECT_THAT(unnamed, Not(HasSubstr(".bin")));
  EXPECT_THAT(unnamed, Not(HasSubstr("declare it as")));  // there is no layout file to change

  const std::string named =
      failures_of([&] { EXPECT_THAT(run, UlpNear(ref, 4).WithAxes("NCHW").Named("my_conv(x)")); });
  EXPECT_THAT(named, HasSubstr("where you write my_conv(x)"));
  EXPECT_THAT(named, Not(HasSubstr(".bin")));
}
