#pragma once
// GoogleTest matchers for users' own tests, with the same worst-element and diagnosis text as
// `validate compare`:
//
//   EXPECT_THAT(my_output, validate::testing::UlpNear(reference, 4));
//   EXPECT_THAT(my_grad, validate::testing::AllClose(reference, 1e-5, 1e-4).WithAxes("OIHW"));
//
// A failure carries compare's gate sentences (how many elements are beyond tolerance, the worst
// one with its coordinates and both values, the smallest tolerance that would have passed) and
// its diagnosis line when a usual layout mistake (axis swap, C/F order, spatial flip) explains the
// failure. A run whose shape differs from the reference's fails, even with the same element count
// (a [3,2] result is not a [2,3] reference); when it is a permutation, the diagnosis names it.
//
// Named("grad_weight") says what is compared, for the diagnosis's advice ("where you write
// grad_weight"; without a name, "the tensor under test").
//
// Axes: WithAxes names them, so coordinates read "n=0 c=5 h=31 w=0" and the diagnosis speaks of
// H, W, O, I. Without it, coordinates are positional ("[0]=0 [1]=5 ...") and the diagnosis still
// runs for 4-d tensors (assumed NCHW: axes 2 and 3 spatial, which holds for OIHW weights too) and
// 2-d ones (assumed MK: a transpose); the message says what it assumed. Other ranks have no usual
// mistakes to try without names.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <gmock/gmock.h>

#include "validate/core/tensor.hpp"

namespace validate::testing {

class TensorMatcher {
 public:
  using is_gtest_matcher = void;

  // Every element within max_ulp ULPs in the logical dtype, except those below the near-zero floor
  // (1% of max|ref|), exempt as in compare: near a cancellation ULPs measure only the cancellation.
  static TensorMatcher ulp(const Tensor& reference, std::uint64_t max_ulp);
  // |run - ref| <= atol OR |run - ref| <= rtol * max(|ref|, floor), as compare's policy defines it.
  static TensorMatcher close(const Tensor& reference, double atol, double rtol);

  // Canonical axis letters for coordinates and diagnosis ("NCHW", "OIHW", "MK", ...); one per
  // axis of the reference, else the match fails saying so.
  TensorMatcher& WithAxes(std::string axes);
  // The dtype ULPs are measured in (default: the reference's element type; bfloat16 for a
  // bfloat16 case stored as float32).
  TensorMatcher& InDtype(DType logical);
  // What the compared tensor is ("grad_weight", "my_conv(x)"): the diagnosis's advice names it
  // ("check the loop order ... where you write grad_weight"); without it, "the tensor under test".
  // A tensor the user's test computed has no file, so the advice never names one.
  TensorMatcher& Named(std::string name);

  bool MatchAndExplain(const Tensor& run, std::ostream* os) const;
  void DescribeTo(std::ostream* os) const;
  void DescribeNegationTo(std::ostream* os) const;

 private:
  std::shared_ptr<const Tensor> ref_;
  std::optional<std::uint64_t> max_ulp_;
  std::optional<double> atol_, rtol_;
  std::string axes_;
  std::string name_;
  std::optional<DType> logical_;
};

inline TensorMatcher UlpNear(const Tensor& reference, std::uint64_t max_ulp) {
  return TensorMatcher::ulp(reference, max_ulp);
}
inline TensorMatcher AllClose(const Tensor& reference, double atol, double rtol) {
  return TensorMatcher::close(reference, atol, rtol);
}

}  // namespace validate::testing

namespace validate {
// How GoogleTest prints a Tensor in a failure ("float32 [2, 3]") instead of its object bytes.
void PrintTo(const Tensor& t, std::ostream* os);
}  // namespace validate
