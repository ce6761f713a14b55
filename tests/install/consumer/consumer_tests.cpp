// What a user writes: load a reference tensor, compute "their" result, match it. The second test
// fails on purpose (a result with H and W exchanged); tests/install/consume.cmake checks that its
// failure text names the worst element and the swap.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "validate/core/npy.hpp"
#include "validate/testing/matchers.hpp"

using validate::testing::AllClose;
using validate::testing::UlpNear;

namespace {

validate::Tensor load_reference() {
  auto t = validate::npy::read(REFERENCE_NPY);
  if (!t) {
    ADD_FAILURE() << t.message();
    return validate::Tensor();
  }
  return std::move(*t);
}

}  // namespace

TEST(Consumer, IdenticalResultPasses) {
  const validate::Tensor ref = load_reference();
  ASSERT_EQ(ref.dim(), 4);
  const validate::Tensor mine = ref.clone();
  EXPECT_THAT(mine, UlpNear(ref, 0).WithAxes("NCHW"));
  EXPECT_THAT(mine, AllClose(ref, 1e-6, 1e-5));
}

TEST(Consumer, SwappedHeightAndWidthFails) {
  const validate::Tensor ref = load_reference();
  ASSERT_EQ(ref.dim(), 4);
  const auto& s = ref.shape();
  ASSERT_EQ(s[2], s[3]) << "the swap must keep the shape, so only the values can tell";
  validate::Tensor mine(ref.dtype(), s);
  for (std::int64_t nc = 0; nc < s[0] * s[1]; ++nc)
    for (std::int64_t h = 0; h < s[2]; ++h)
      for (std::int64_t w = 0; w < s[3]; ++w)
        mine.set((nc * s[2] + h) * s[3] + w, ref.get((nc * s[2] + w) * s[3] + h));
  EXPECT_THAT(mine, UlpNear(ref, 4).WithAxes("NCHW"));
}
