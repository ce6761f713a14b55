// ULP distances checked against values worked out by hand from the bit patterns.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "validate/metrics/ulp.hpp"
#include "validate/metrics/ulp_histogram.hpp"

using validate::DType;
using validate::compare::ulp_distance;
using validate::compare::ulp_distance_bits16;
using validate::compare::UlpHistogram;

namespace {
float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
constexpr float kInf = std::numeric_limits<float>::infinity();
}  // namespace

TEST(Ulp, Float32HandValues) {
  const DType f = DType::float32;
  EXPECT_EQ(ulp_distance(1.0f, std::nextafter(1.0f, 2.0f), f), 1u);
  EXPECT_EQ(ulp_distance(1.0f, std::nextafter(1.0f, 0.0f), f), 1u);
  EXPECT_EQ(ulp_distance(0.0f, -0.0f, f), 0u);  // +0 = -0
  const float min_sub = from_bits(0x00000001u);
  EXPECT_EQ(ulp_distance(0.0f, min_sub, f), 1u);
  EXPECT_EQ(ulp_distance(-0.0f, min_sub, f), 1u);
  EXPECT_EQ(ulp_distance(-min_sub, min_sub, f), 2u);  // across zero: -1 -> 0 -> +1
  EXPECT_EQ(ulp_distance(from_bits(0x007fffffu), std::numeric_limits<float>::min(), f),
            1u);  // subnormal->normal
  EXPECT_EQ(ulp_distance(std::numeric_limits<float>::max(), kInf, f), 1u);
  EXPECT_EQ(ulp_distance(-1.0f, 1.0f, f), 2u * 0x3f800000u);  // 2130706432
  EXPECT_EQ(ulp_distance(-kInf, kInf, f),
            2u * 0x7f800000u);  // 4278190080: needs more than 32 signed bits
  EXPECT_EQ(ulp_distance(2.0f, 1.0f, f), 0x00800000u);  // one binade = 2^23 values
}

TEST(Ulp, BFloat16HandValues) {
  const DType b = DType::bfloat16;
  EXPECT_EQ(ulp_distance(1.0f, 1.0078125f, b), 1u);         // 1 + 2^-7: next bfloat16 after 1
  EXPECT_EQ(ulp_distance(1.0f, 1.0f + 1.0f / 256, b), 0u);  // halfway: ties to even -> 1.0
  EXPECT_EQ(ulp_distance(1.0f, 1.0f + 3.0f / 256, b), 2u);  // halfway 1.5 steps: to even (2 steps)
  const float min_sub = from_bits(0x00010000u);             // bfloat16 0x0001 = 2^-133
  EXPECT_EQ(ulp_distance(0.0f, min_sub, b), 1u);
  EXPECT_EQ(ulp_distance(-min_sub, min_sub, b), 2u);
  EXPECT_EQ(ulp_distance(-0.0f, 0.0f, b), 0u);
  EXPECT_EQ(ulp_distance(from_bits(0x7f7f0000u), kInf, b), 1u);  // max finite bfloat16 -> inf
  EXPECT_EQ(ulp_distance(-1.0f, 1.0f, b), 2u * 0x3f80u);         // 32512
  // A float32-sized difference is not a bfloat16 ULP: 1 and nextafter(1) are the same bfloat16.
  EXPECT_EQ(ulp_distance(1.0f, std::nextafter(1.0f, 2.0f), b), 0u);
}

TEST(Ulp, Float16HandValues) {
  const DType h = DType::float16;
  EXPECT_EQ(ulp_distance(1.0f, 1.0f + 1.0f / 1024, h), 1u);
  const float min_sub = std::ldexp(1.0f, -24);
  EXPECT_EQ(ulp_distance(0.0f, min_sub, h), 1u);
  EXPECT_EQ(ulp_distance(-min_sub, min_sub, h), 2u);
  EXPECT_EQ(ulp_distance(1023 * min_sub, std::ldexp(1.0f, -14), h),
            1u);  // largest subnormal -> min normal
  EXPECT_EQ(ulp_distance(65504.0f, kInf, h), 1u);
  EXPECT_EQ(ulp_distance(-1.0f, 1.0f, h), 2u * 0x3c00u);  // 30720
  EXPECT_EQ(ulp_distance_bits16(0x8001, 0x0001), 2u);
  EXPECT_EQ(ulp_distance_bits16(0x8000, 0x0000), 0u);
}

TEST(UlpHistogram, BinsAndPercentiles) {
  EXPECT_EQ(UlpHistogram::coarse_bin(0), 0);
  EXPECT_EQ(UlpHistogram::coarse_bin(1), 1);
  EXPECT_EQ(UlpHistogram::coarse_bin(2), 2);
  EXPECT_EQ(UlpHistogram::coarse_bin(3), 3);
  EXPECT_EQ(UlpHistogram::coarse_bin(4), 3);
  EXPECT_EQ(UlpHistogram::coarse_bin(5), 4);
  EXPECT_EQ(UlpHistogram::coarse_bin(8), 4);
  EXPECT_EQ(UlpHistogram::coarse_bin(9), 5);
  EXPECT_EQ(UlpHistogram::coarse_label(3), "3-4");
  EXPECT_EQ(UlpHistogram::coarse_label(5), "9-16");
  EXPECT_EQ(UlpHistogram::fine_bin(1024), 1024);
  EXPECT_EQ(UlpHistogram::fine_bin(1025), 1025);
  EXPECT_EQ(UlpHistogram::fine_upper(1025), 1024u + 16u);
  EXPECT_LT(UlpHistogram::fine_bin(4278190080ull), UlpHistogram::kFineBins);
  // Every distance lies inside its bin.
  for (std::uint64_t d : {0ull, 1ull, 7ull, 1024ull, 1025ull, 1040ull, 1041ull, 99999ull,
                          1ull << 31, 4278190080ull}) {
    const int b = UlpHistogram::fine_bin(d);
    EXPECT_LE(d, UlpHistogram::fine_upper(b)) << d;
    if (b > 0) {
      EXPECT_GT(d, UlpHistogram::fine_upper(b - 1)) << d;
    }
  }
  UlpHistogram h;
  for (int i = 1; i <= 100; ++i) h.add(static_cast<std::uint64_t>(i));  // 1..100
  EXPECT_EQ(h.percentile(0.5), 50u);
  EXPECT_EQ(h.percentile(0.99), 99u);
  EXPECT_EQ(h.percentile(0.999), 100u);
  auto c = h.coarse();  // 1 | 2 | 3-4 | 5-8 | 9-16 | 17-32 | 33-64 | 65-128
  ASSERT_EQ(c.size(), 9u);
  EXPECT_EQ(c[0], 0u);
  EXPECT_EQ(c[1], 1u);
  EXPECT_EQ(c[3], 2u);
  EXPECT_EQ(c[8], 36u);
}
