// The sentence a failed gate check gives (check_tensor_gates, tensor_gates.cpp) on a hand-built
// pair.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "validate/compare/comparison.hpp"
#include "validate/metrics/metrics.hpp"

using namespace validate;
using namespace validate::compare;

namespace {

ArrayView view(const std::vector<float>& v) {
  return ArrayView{reinterpret_cast<const std::byte*>(v.data()), DType::float32,
                   static_cast<std::int64_t>(v.size()), false};
}

}  // namespace

// A failure of a few float32 ULPs shows both values with enough digits to see them differ.
TEST(GateSentences, WorstValuesAreShownWithEnoughDigitsToDiffer) {
  std::vector<float> r(6, 1.1234567f), x = r;
  x[4] = std::nextafter(std::nextafter(r[4], 2.0f), 2.0f);  // 2 ULP up
  MetricOptions opt;
  opt.logical = DType::float32;
  opt.max_ulp = 1;
  auto st = compute_metrics(view(r), view(x), opt);
  ASSERT_TRUE(st) << st.message();
  Gates gates;
  gates.max_ulp = 1;
  const auto g = check_tensor_gates(*st, gates, {2, 3}, "MK", view(r), view(x));
  ASSERT_FALSE(g.passed());
  ASSERT_FALSE(g.reasons.empty());
  // 1.1234567 and its second successor first differ at 8 significant digits (numpy agrees).
  EXPECT_NE(g.reasons[0].find("worst at m=1 k=1: ref 1.1234567, run 1.123457 "), std::string::npos)
      << g.reasons[0];
}
