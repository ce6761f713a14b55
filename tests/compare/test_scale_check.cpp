// What a stored error-bound scale may be (cases/scale_check.hpp) and the gates a policy may not
// leave a tensor with (Policy::check_element_gates), on hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "validate/cases/scale_check.hpp"
#include "validate/core/dtype.hpp"
#include "validate/compare/policy.hpp"

using namespace validate;

namespace {

cases::StoredValues f32(const std::vector<float>& v) {
  return {v.data(), DType::float32, static_cast<std::int64_t>(v.size())};
}
bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

}  // namespace

// n = 4 products: |y| <= sqrt(4) rho = 2 rho, so rho = 1 allows |ref| up to 2 (and the slack of
// 1 + 2^-5 + 8 u: 2.0625), not 2.5; the ceiling 10 allows 10, not 11.
TEST(ScaleCheck, FloorAndCeilingOfHandComputedScales) {
  const cases::ScaleLimit lim{4, 10.0, true};
  const std::vector<float> s = {1, 2, 10}, ok_ref = {2.0f, -4.1f, 20};
  EXPECT_EQ(cases::check_scale_values(f32(s), 1, f32(ok_ref), lim), "");
  const std::vector<float> low_ref = {2.5f, 0, 0};
  const std::string low = cases::check_scale_values(f32(s), 1, f32(low_ref), lim);
  EXPECT_TRUE(has(low, "element 0 is 1 where the reference is 2.5")) << low;
  EXPECT_TRUE(has(low, "|ref| / sqrt(n) = 1.25 (n = 4)")) << low;
  const std::vector<float> high = {1, 11, 1};
  const std::string over = cases::check_scale_values(f32(high), 1, f32(ok_ref), lim);
  EXPECT_TRUE(has(over, "element 1 is 11, above 10")) << over;
  // the unit multiplies every value before the checks: 11 * 2^-1 = 5.5 passes
  EXPECT_EQ(cases::check_scale_values(f32(high), 0.5, {}, lim), "");
}

TEST(ScaleCheck, NanInfNegativeAndZeroAreNamed) {
  const cases::ScaleLimit lim{9, std::nullopt, true};
  const std::vector<float> ref = {0, 3, 0};
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(has(cases::check_scale_values(f32({1, nan, 1}), 1, f32(ref), lim), "element 1 is NaN"));
  EXPECT_TRUE(has(cases::check_scale_values(f32({1, 1, inf}), 1, f32(ref), lim), "element 2 is +inf"));
  EXPECT_TRUE(has(cases::check_scale_values(f32({-0.5f, 1, 1}), 1, f32(ref), lim), "element 0 is -0.5"));
  // zero where the reference is 0 is a scale a sum of no products has; zero under 3 is not
  EXPECT_EQ(cases::check_scale_values(f32({0, 1, 0}), 1, f32(ref), lim), "");
  const std::string zero = cases::check_scale_values(f32({0, 0, 0}), 1, f32(ref), lim);
  EXPECT_TRUE(has(zero, "element 1 is 0 where the reference is 3")) << zero;
  EXPECT_TRUE(has(zero, "(a zero scale)")) << zero;
  // a checkpoint's scale (no floor) may be zero anywhere
  EXPECT_EQ(cases::check_scale_values(f32({0, 0, 0}), 1, f32(ref), cases::ScaleLimit{9, std::nullopt, false}), "");
}

TEST(ScaleCheck, Float16ValuesAreReadTimesTheirUnit) {
  // float16 0x6400 = 1024; times 2^-10 = 1: above a ceiling of 0.9, under one of 1.1
  const std::vector<std::uint16_t> h = {0x6400, 0x0000};
  const cases::StoredValues sv{h.data(), DType::float16, 2};
  EXPECT_TRUE(has(cases::check_scale_values(sv, std::ldexp(1.0, -10), {}, {1, 0.9, true}), "element 0 is 1, above 0.9"));
  EXPECT_EQ(cases::check_scale_values(sv, std::ldexp(1.0, -10), {}, {1, 1.1, true}), "");
}

// A large scale is checked in slices on every core: the message still names the first bad element
// of the whole tensor, whichever slice finds one first.
TEST(ScaleCheck, TheFirstBadElementOfALargeScaleIsNamed) {
  const std::size_t n = std::size_t(9) << 20;  // several slices of 2^21 elements
  std::vector<float> s(n, 1.0f), ref(n, 0.5f);
  const cases::ScaleLimit lim{4, 2.0, true};
  EXPECT_EQ(cases::check_scale_values(f32(s), 1, f32(ref), lim), "");
  s[n - 3] = -1.0f;  // the last slice only
  EXPECT_TRUE(has(cases::check_scale_values(f32(s), 1, f32(ref), lim), "element " + std::to_string(n - 3) + " is -1"));
  s[(n / 2) + 5] = 3.0f;  // a middle slice, before it
  EXPECT_TRUE(has(cases::check_scale_values(f32(s), 1, f32(ref), lim),
                  "element " + std::to_string(n / 2 + 5) + " is 3, above 2"));
  ref[7] = 100.0f;  // the first slice, first of all: below |ref| / sqrt(n)
  EXPECT_TRUE(has(cases::check_scale_values(f32(s), 1, f32(ref), lim), "element 7 is 1 where the reference is 100"));
}

// float16 scales are widened eight (or more) at a time: every positive pattern in order, each
// ceiling a pattern's own value, names the next pattern first (subnormals, the first normal, 1,
// the largest finite); the infinities and NaNs after them are named as such.
TEST(ScaleCheck, EveryFloat16PatternIsReadAsItsValue) {
  std::vector<std::uint16_t> h(0x7c00);
  for (std::size_t k = 0; k < h.size(); ++k) h[k] = static_cast<std::uint16_t>(k);
  const cases::StoredValues sv{h.data(), DType::float16, static_cast<std::int64_t>(h.size())};
  for (std::uint16_t k : {std::uint16_t(1), std::uint16_t(0x3fe), std::uint16_t(0x3ff), std::uint16_t(0x400),
                          std::uint16_t(0x3bff), std::uint16_t(0x3c00), std::uint16_t(0x7bfe)}) {
    const double ceiling = validate::float16_bits_to_float(k);
    const std::string got = cases::check_scale_values(sv, 1, {}, {1, ceiling, false});
    EXPECT_TRUE(has(got, "element " + std::to_string(k + 1) + " is ")) << k << ": " << got;
  }
  EXPECT_EQ(cases::check_scale_values(sv, 1, {}, {1, std::nullopt, false}), "");
  for (std::uint16_t bad : {std::uint16_t(0x7c00), std::uint16_t(0x7e01), std::uint16_t(0x8001), std::uint16_t(0xfc00)}) {
    std::vector<std::uint16_t> one = h;
    one[5000] = bad;
    const cases::StoredValues ov{one.data(), DType::float16, static_cast<std::int64_t>(one.size())};
    EXPECT_TRUE(has(cases::check_scale_values(ov, 1, {}, {1, std::nullopt, false}), "element 5000 is ")) << bad;
  }
}

TEST(PolicyElementGates, MinPccAloneIsRefusedAndAnElementTestIsNot) {
  compare::Policy p = compare::Policy::builtin();
  EXPECT_TRUE(p.check_element_gates());
  ASSERT_TRUE(p.add_gate("float32.bound=none"));
  const Status st = p.check_element_gates();
  ASSERT_FALSE(st);
  EXPECT_TRUE(has(st.message(), "float32.")) << st.message();
  EXPECT_TRUE(has(st.message(), "min_pcc alone")) << st.message();
  ASSERT_TRUE(p.add_gate("float32.max_ulp=1e20"));  // any distance: still no element test
  EXPECT_FALSE(p.check_element_gates());
  ASSERT_TRUE(p.add_gate("float32.max_ulp=4"));
  EXPECT_TRUE(p.check_element_gates());
  ASSERT_TRUE(p.add_gate("float32.max_ulp=none"));
  ASSERT_TRUE(p.add_gate("float32.rtol=5e-4"));
  EXPECT_TRUE(p.check_element_gates());
  // the probe does not count as a match: an unmatched --gate is still reported
  compare::Policy q = compare::Policy::builtin();
  ASSERT_TRUE(q.add_gate("float16.conv_transpose2d.grad_bias.atol=1"));
  EXPECT_TRUE(q.check_element_gates());
  EXPECT_EQ(q.unmatched_rules().size(), 1u);
}

TEST(PolicyElementGates, InfiniteTolerancesAndAFloorAtMaxRefAreRefused) {
  compare::Policy p = compare::Policy::builtin();
  for (const char* g : {"bound=inf", "atol=inf", "float32.rtol=1e999", "near_zero=1", "near_zero=1e30"})
    EXPECT_FALSE(p.add_gate(g)) << g;
  EXPECT_TRUE(p.add_gate("near_zero=0.5"));
  EXPECT_FALSE(p.add_json(nlohmann::json::parse(R"({"rules": [{"rtol": 1e-6, "near_zero": 1e30}]})"), "nz.json"));
}
