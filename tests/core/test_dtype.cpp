#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

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

// From double the rounding is done once: through float32 the 2^-40 would be lost first, leaving
// a tie that goes to even (1.0) instead of up.
TEST(Dtype, RoundsOnceFromDouble) {
  const double above_tie_bf16 = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  EXPECT_EQ(round_to_dtype(above_tie_bf16, DType::bfloat16), 1.0 + std::ldexp(1.0, -7));
  EXPECT_EQ(round_to_dtype(static_cast<float>(above_tie_bf16), DType::bfloat16), 1.0f);
  const double above_tie_f16 = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(round_to_dtype(above_tie_f16, DType::float16), 1.0 + std::ldexp(1.0, -10));
  EXPECT_EQ(round_to_dtype(-above_tie_f16, DType::float16), -(1.0 + std::ldexp(1.0, -10)));
  // Largest finite values, the ties just above them, subnormals, and values past the last one.
  EXPECT_EQ(round_to_dtype(65519.99, DType::float16), 65504.0);
  EXPECT_EQ(round_to_dtype(65520.0, DType::float16), HUGE_VAL);
  EXPECT_EQ(round_to_dtype(0x1.fefp127, DType::bfloat16), 0x1.fep127);
  EXPECT_EQ(round_to_dtype(-0x1.ffp127, DType::bfloat16), -HUGE_VAL);
  EXPECT_EQ(round_to_dtype(3 * 0x1p-26, DType::float16), 0x1p-24);  // 0.75 of the smallest subnormal
  EXPECT_EQ(round_to_dtype(0x1p-134, DType::bfloat16), 0.0);         // a tie below the smallest
  EXPECT_EQ(round_to_dtype(0x1.8p-133, DType::bfloat16), 0x1p-132);  // tie to even (2 x 2^-133)
  EXPECT_TRUE(std::isnan(round_to_dtype(std::nan(""), DType::bfloat16)));
  EXPECT_EQ(round_to_dtype(0.1, DType::float32), static_cast<double>(0.1f));
  // On values that float32 holds exactly, it agrees with the float converters.
  std::uint32_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 1664525u + 1013904223u;
    float f;
    std::memcpy(&f, &state, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(round_to_dtype(static_cast<double>(f), DType::bfloat16), round_to_dtype(f, DType::bfloat16)) << f;
    ASSERT_EQ(round_to_dtype(static_cast<double>(f), DType::float16), round_to_dtype(f, DType::float16)) << f;
  }
}

// The once-from-double rounding against libm's route to the same value (frexp for the exponent,
// ldexp for the exact scalings, nearbyint for the tie to even) on random doubles of every exponent,
// double subnormals included, and on the ties and midpoints of both dtypes' spacings.
double rounded_by_libm(double x, int digits, int min_q, double largest) {
  int e = 0;
  std::frexp(x, &e);
  const int q = std::max(e - digits, min_q);
  const double r = std::ldexp(std::nearbyint(std::ldexp(x, -q)), q);
  return std::fabs(r) > largest ? std::copysign(HUGE_VAL, x) : r;
}

TEST(Dtype, RoundingFromDoubleEqualsLibmOnEveryExponent) {
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  std::vector<double> xs;
  for (int i = 0; i < 300000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    double d;
    std::memcpy(&d, &state, 8);
    if (std::isfinite(d) && d != 0) xs.push_back(d);
    // and the same significand in a binade the dtypes use
    const double significand = 1.0 + static_cast<double>(state >> 11) * 0x1p-53;  // [1, 2)
    const int binade = static_cast<int>((state >> 3) % 271) - 140;
    xs.push_back(std::ldexp(significand, binade) * (state & 1 ? -1 : 1));
  }
  for (int k = -140; k <= 130; ++k)  // every binade the two dtypes use, and past their ends
    for (double m : {1.0, 1.0 + 0x1p-8, 1.0 + 0x1p-7 + 0x1p-8, 1.0 + 0x1p-11, 1.0 + 0x1p-10 + 0x1p-11, 1.5, 1.99})
      for (double s : {1.0, -1.0}) xs.push_back(s * std::ldexp(m, k));
  for (double x : xs) {
    ASSERT_EQ(round_to_dtype(x, DType::bfloat16), rounded_by_libm(x, 8, -133, 0x1.fep127)) << x;
    ASSERT_EQ(round_to_dtype(x, DType::float16), rounded_by_libm(x, 11, -24, 65504.0)) << x;
  }
}

// The vectorized in-place rounding against the once-from-double rounding (an independent
// derivation) on every sign and exponent with a spread of significands: every 2^9-th bit
// pattern, plus ties (even and odd kept bit), the largest finite values (round to inf), and NaNs,
// which must stay NaN with the scalar conversion's bits.
TEST(Bfloat16, InPlaceRoundingEqualsTheScalarDefinitionOnEveryExponent) {
  std::vector<std::uint32_t> pats;
  for (std::uint64_t u = 0; u <= 0xffffffffull; u += 0x200 + 0x11) pats.push_back(static_cast<std::uint32_t>(u));
  for (std::uint32_t hi : {0x3f80u, 0x3f81u, 0x0001u, 0x7f7fu, 0xff7fu, 0x8000u})
    for (std::uint32_t lo : {0x7fffu, 0x8000u, 0x8001u, 0xffffu, 0u})
      pats.push_back(hi << 16 | lo);
  for (std::uint32_t nan : {0x7f800001u, 0x7fc00000u, 0xffbfffffu, 0x7fffffffu}) pats.push_back(nan);
  std::vector<float> v(pats.size());
  std::memcpy(v.data(), pats.data(), 4 * pats.size());
  std::vector<float> r = v;
  round_to_bfloat16_inplace(r.data(), r.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint32_t got;
    std::memcpy(&got, &r[i], 4);
    if (std::isnan(v[i])) {
      if (got != static_cast<std::uint32_t>(float_to_bfloat16_bits(v[i])) << 16 || !std::isnan(r[i])) ++bad;
      continue;
    }
    const double want = round_to_dtype(static_cast<double>(v[i]), DType::bfloat16);
    if (!(static_cast<double>(r[i]) == want && std::signbit(r[i]) == std::signbit(want)))
      if (++bad < 5) ADD_FAILURE() << std::hex << pats[i] << ": got " << got << " want " << want;
  }
  EXPECT_EQ(bad, 0u) << " of " << v.size();
}

// Error-bound scales are stored as float16 rounded toward +infinity (cases/scale_file.hpp): the
// batch conversion must give the smallest float16 >= x for every x, found here by binary search
// over every finite float16 value (widened by the scalar float16_bits_to_float, tested above) —
// at every float16 value and the floats on either side of it, at midpoints, and on a million
// random bit patterns, with and without a power-of-two multiplier.
TEST(Float16, RoundingUpGivesTheSmallestFloat16NotBelowTheValue) {
  std::vector<double> finite;  // every finite float16 value, ascending (-0 and +0 both 0)
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const float v = float16_bits_to_float(static_cast<std::uint16_t>(h));
    if (std::isfinite(v)) finite.push_back(v);
  }
  std::sort(finite.begin(), finite.end());
  auto smallest_not_below = [&](double x) {
    auto it = std::lower_bound(finite.begin(), finite.end(), x);
    return it == finite.end() ? INFINITY : *it;
  };
  std::vector<float> xs;
  for (std::size_t i = 0; i < finite.size(); ++i) {
    const float v = static_cast<float>(finite[i]);
    xs.insert(xs.end(), {v, std::nextafter(v, INFINITY), std::nextafter(v, -INFINITY)});
    if (i + 1 < finite.size()) xs.push_back(static_cast<float>((finite[i] + finite[i + 1]) / 2));
  }
  xs.insert(xs.end(), {65504.0f, 65519.0f, 65520.0f, 1e30f, -1e30f, 3.4e38f, 1e-45f, -1e-45f, 1e-38f, 0x1p-25f});
  std::uint32_t state = 12345;
  for (int i = 0; i < 1000000; ++i) {
    state = state * 1664525u + 1013904223u;
    float f;
    std::memcpy(&f, &state, 4);
    if (!std::isnan(f)) xs.push_back(f);
  }
  std::vector<std::uint16_t> got(xs.size());
  for (float multiplier : {1.0f, 0x1p-20f, 0x1p12f}) {
    float_to_float16_up(xs.data(), got.data(), xs.size(), multiplier);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const double x = static_cast<double>(xs[i]) * multiplier;
      const double want = smallest_not_below(x), have = float16_bits_to_float(got[i]);
      if (have != want && bad++ < 5) ADD_FAILURE() << "x = " << x << ": got " << have << ", want " << want;
    }
    EXPECT_EQ(bad, 0u) << "multiplier " << multiplier;
  }
  const float special[] = {INFINITY, -INFINITY, std::numeric_limits<float>::quiet_NaN(), 0.0f, -0.0f};
  std::uint16_t s[5];
  float_to_float16_up(special, s, 5);
  EXPECT_EQ(s[0], 0x7c00u);
  EXPECT_EQ(s[1], 0xfc00u);
  EXPECT_EQ(s[2] & 0x7e00u, 0x7e00u);  // a quiet NaN
  EXPECT_EQ(s[3], 0x0000u);
  EXPECT_EQ(s[4], 0x8000u);
}

TEST(Float16, BatchWideningEqualsTheScalarDefinitionOnEveryValue) {
  std::vector<std::uint16_t> all(0x10000);
  for (std::uint32_t h = 0; h < 0x10000u; ++h) all[h] = static_cast<std::uint16_t>(h);
  std::vector<float> wide(all.size());
  float16_to_float(all.data(), wide.data(), all.size());
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const float want = float16_bits_to_float(all[h]);
    std::uint32_t a, b;
    std::memcpy(&a, &wide[h], 4);
    std::memcpy(&b, &want, 4);
    ASSERT_EQ(a, b) << std::hex << "half 0x" << h;
  }
}
