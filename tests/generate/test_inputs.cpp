// The seeded inputs: their scales and rounding to the case dtype, the exact (small-integer) fill,
// and the parallel draw equal to the serial stream.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "generate/generate_fixture.hpp"
#include "validate/core/rng.hpp"
#include "validate/generate/inputs.hpp"

using namespace validate;
using validate::testing::odd_case;

TEST(Inputs, ScalesAndLowPrecisionRounding) {
  auto c = odd_case(DType::bfloat16);
  auto in = generate::make_inputs(c, cases::Op::conv2d, 42, generate::Fill::random);
  for (auto& [name, t] : in)
    for (std::int64_t i = 0; i < t.numel(); ++i)
      ASSERT_EQ(static_cast<float>(t.get(i)), round_to_dtype(static_cast<float>(t.get(i)), DType::bfloat16)) << name;
  auto f16 = generate::make_inputs(odd_case(DType::float16), cases::Op::conv2d, 42, generate::Fill::random);
  EXPECT_EQ(f16.at("input").dtype(), DType::float16);
}

TEST(Inputs, ExactFillIsSmallIntegers) {
  auto c = odd_case(DType::float32);
  auto in = generate::make_inputs(c, cases::Op::conv2d, 42, generate::Fill::exact);
  int nonzero = 0;
  for (auto& [name, t] : in)
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      double v = t.get(i);
      ASSERT_EQ(v, std::round(v)) << name;
      ASSERT_LE(std::abs(v), name == "target" ? 4 : 2) << name;
      nonzero += v != 0;
    }
  EXPECT_GT(nonzero, 50);
}

TEST(Inputs, ParallelDrawEqualsTheSerialStream) {
  // Large tensors are drawn by several threads; every element must still be normal(i) of its stream.
  cases::Case c;
  c.name = "big";
  auto& cp = c.params<cases::ConvParams>();
  cp.n = 1; cp.c = 1100; cp.h = 32; cp.w = 32;  // 1,126,400 input elements (> 2^20)
  c.params<cases::MatmulParams>() = cases::im2col_gemm(cp);
  auto in = generate::make_inputs(c, cases::Op::conv2d, 42, generate::Fill::random);
  const Tensor& x = in.at("input");
  Philox rng(42, "big", "conv2d", "input");
  const std::int64_t n = x.numel();
  for (std::int64_t i : {std::int64_t{0}, std::int64_t{1}, n / 2 - 1, n / 2, n / 2 + 1, n / 2 + 3, n - 1})
    EXPECT_EQ(static_cast<float>(x.get(i)), rng.normal(static_cast<std::uint64_t>(i))) << i;
}
