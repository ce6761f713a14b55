#pragma once
// GoogleTest matchers for users' own tests, with the same worst-element and diagnosis text as
// `validate compare`:
//
//   EXPECT_THAT(my_output, validate::testing::UlpNear(reference, 4));
//   EXPECT_THAT(my_grad, validate::testing::AllClose(reference, 1e-5, 1e-4).WithAxes("OIHW"));
//
// A failure says which element is worst (in canonical coordinates when axes are given), both
// values, how many elements are beyond tolerance, the smallest tolerance that would have passed,
// and, when a usual layout mistake (axis swap, C/F order, spatial flip) explains it, which one.
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

  // Elements within max_ulp ULPs of the logical dtype (near-zero elements are judged by atol).
  static TensorMatcher ulp(const Tensor& reference, std::uint64_t max_ulp);
  // |run - ref| <= atol OR |run - ref| <= rtol * max(|ref|, floor), as compare's policy defines it.
  static TensorMatcher close(const Tensor& reference, double atol, double rtol);

  // Canonical axis letters for coordinates and diagnosis ("NCHW", "OIHW", "MK", ...).
  TensorMatcher& WithAxes(std::string axes);
  // The dtype ULPs are measured in (default: the reference's element type; bfloat16 for a
  // bfloat16 case stored as float32).
  TensorMatcher& InDtype(DType logical);

  bool MatchAndExplain(const Tensor& run, std::ostream* os) const;
  void DescribeTo(std::ostream* os) const;
  void DescribeNegationTo(std::ostream* os) const;

 private:
  std::shared_ptr<const Tensor> ref_;
  std::optional<std::uint64_t> max_ulp_;
  std::optional<double> atol_, rtol_;
  std::string axes_;
  std::optional<DType> logical_;
};

inline TensorMatcher UlpNear(const Tensor& reference, std::uint64_t max_ulp) {
  return TensorMatcher::ulp(reference, max_ulp);
}
inline TensorMatcher AllClose(const Tensor& reference, double atol, double rtol) {
  return TensorMatcher::close(reference, atol, rtol);
}

}  // namespace validate::testing
