#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "validate/core/dtype.hpp"

using namespace validate;

namespace {
float f(std::uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}
}  // namespace

TEST(Bfloat16, ExactValuesRoundTrip) {
  EXPECT_EQ(float_to_bfloat16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16_bits(-2.0f), 0xc000);
  EXPECT_EQ(bfloat16_bits_to_float(0x3f80), 1.0f);
  EXPECT_EQ(float_to_bfloat16_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_bfloat16_bits(-0.0f), 0x8000);
}

TEST(Bfloat16, TiesRoundToEven) {
  // 1 + 2^-8 lies exactly between 1 (even mantissa) and 1 + 2^-7: rounds down to 1.
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3*2^-8 lies between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up.
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  // Just above the tie rounds up.
  EXPECT_EQ(float_to_bfloat16_bits(f(0x3f808001)), 0x3f81);
}

TEST(Bfloat16, SubnormalsOverflowNaN) {
  // Smallest float32 subnormal rounds to bf16 zero (its low 16 bits are dropped with RNE).
  EXPECT_EQ(float_to_bfloat16_bits(f(0x00000001)), 0x0000);
  // A bf16 subnormal survives exactly.
  EXPECT_EQ(float_to_bfloat16_bits(f(0x00010000)), 0x0001);
  // FLT_MAX is above bf16's largest finite value (0x7f7f) by more than half an ULP: inf.
  EXPECT_EQ(float_to_bfloat16_bits(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(float_to_bfloat16_bits(-std::numeric_limits<float>::infinity()), 0xff80);
  std::uint16_t nan = float_to_bfloat16_bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(bfloat16_bits_to_float(nan)));
  // A signalling NaN whose payload sits only in the low bits must not become infinity.
  EXPECT_TRUE(std::isnan(bfloat16_bits_to_float(float_to_bfloat16_bits(f(0x7f800001)))));
}

TEST(Float16, ExactAndTies) {
  EXPECT_EQ(float_to_float16_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_float16_bits(-2.5f), 0xc100);
  EXPECT_EQ(float16_bits_to_float(0x3c00), 1.0f);
  // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: even -> 1.
  EXPECT_EQ(float_to_float16_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11: tie between 0x3c01 (odd) and 0x3c02 (even) -> 0x3c02.
  EXPECT_EQ(float_to_float16_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
}

TEST(Float16, SubnormalsAndOverflow) {
  EXPECT_EQ(float_to_float16_bits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float16_bits_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(float_to_float16_bits(std::ldexp(1.0f, -25)), 0x0000);  // tie with 0 (even): 0
  EXPECT_EQ(float_to_float16_bits(std::ldexp(3.0f, -26)), 0x0001);  // 0.75 ulp -> 1
  EXPECT_EQ(float_to_float16_bits(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp tie -> 2 (even)
  EXPECT_EQ(float_to_float16_bits(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(float16_bits_to_float(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(float_to_float16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_float16_bits(65519.0f), 0x7bff);  // below the midpoint 65520
  EXPECT_EQ(float_to_float16_bits(65520.0f), 0x7c00);  // midpoint rounds to even = inf
  EXPECT_EQ(float_to_float16_bits(-1e6f), 0xfc00);
  EXPECT_TRUE(std::isnan(float16_bits_to_float(float_to_float16_bits(std::nanf("")))));
  EXPECT_EQ(float_to_float16_bits(-0.0f), 0x8000);
}

TEST(Float16, AllHalfValuesRoundTripThroughFloat) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    float x = float16_bits_to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(x)) continue;
    ASSERT_EQ(float_to_float16_bits(x), h) << std::hex << h;
  }
}

TEST(Dtype, NamesAndStorage) {
  EXPECT_EQ(parse_dtype("bf16"), DType::bfloat16);
  EXPECT_EQ(parse_dtype("float16"), DType::float16);
  EXPECT_FALSE(parse_dtype("int8").has_value());
  EXPECT_EQ(storage_dtype(DType::bfloat16), DType::float32);
  EXPECT_EQ(storage_dtype(DType::float16), DType::float16);
  EXPECT_EQ(round_to_dtype(1.0f + std::ldexp(1.0f, -8), DType::bfloat16), 1.0f);
}
