// Element counts that cannot wrap: checked_mul / checked_numel name an overflow, shape_numel
// saturates. The boundaries are powers of two worked out by hand: 2^31 * 2^32 = 2^63 is one past
// INT64_MAX, 3037000499^2 = 9223372030926249001 is the largest square that fits.
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

#include "validate/core/checked_shape.hpp"

namespace validate {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

TEST(CheckedShape, MultipliesWhatFits) {
  EXPECT_EQ(checked_mul(6, 7), 42);
  EXPECT_EQ(checked_mul(0, kMax), 0);
  EXPECT_EQ(checked_mul(kMax, 1), kMax);
  EXPECT_EQ(checked_mul(3037000499, 3037000499), std::int64_t{9223372030926249001});
  EXPECT_EQ(checked_mul(std::int64_t{1} << 31, (std::int64_t{1} << 32) - 1),
            std::int64_t{9223372034707292160});  // 2^63 - 2^31
}

TEST(CheckedShape, RefusesOverflowAndNegatives) {
  EXPECT_FALSE(checked_mul(std::int64_t{1} << 31, std::int64_t{1} << 32));  // 2^63
  EXPECT_FALSE(checked_mul(3037000500, 3037000500));                         // 2^63 + 7.8e9
  EXPECT_FALSE(checked_mul(-1, 2));
  EXPECT_FALSE(checked_mul(2, -1));
}

TEST(CheckedShape, NumelOfShapesThatWrapped) {
  // [65536]^4 = 2^64 wrapped to exactly 0 when multiplied out in int64; [100000]^4 = 1e20.
  EXPECT_FALSE(checked_numel({65536, 65536, 65536, 65536}));
  EXPECT_FALSE(checked_numel({100000, 100000, 100000, 100000}));
  EXPECT_FALSE(checked_numel({2, -3}));
  EXPECT_EQ(checked_numel({2, 3, 4, 5}), 120);
  EXPECT_EQ(checked_numel({}), 1);  // a 0-d tensor holds one element
  EXPECT_EQ(checked_numel({65536, 65536, 65536, 0}), 0);
  EXPECT_EQ(shape_numel({65536, 65536, 65536, 65536}), kMax);
  EXPECT_EQ(shape_numel({100000, 100000, 100000, 100000}), kMax);
  EXPECT_EQ(checked_numel({std::int64_t{1} << 40, std::int64_t{1} << 23, 0}), 0);
  EXPECT_EQ(shape_numel({std::int64_t{1} << 40, std::int64_t{1} << 23, 0}), 0);  // no elements at all
  EXPECT_EQ(shape_numel({2, 3, 4, 5}), 120);
}

}  // namespace
}  // namespace validate
