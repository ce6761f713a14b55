// How a set stores an error-bound scale (cases/scale_file.hpp, docs/formats.md "scales"): float16
// times a power of two, every value rounded up, checked against the float32 scale it stands for.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "validate/cases/scale_file.hpp"
#include "validate/core/dtype.hpp"

using namespace validate;

namespace {

Tensor float32_tensor(const Shape& shape, const std::vector<float>& v) {
  Tensor t(DType::float32, shape);
  for (std::size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
  return t;
}

}  // namespace

// Every axis a different size; values over 40 octaves below the largest (which sets the unit),
// zeros, a NaN and an infinity. Each stored value times the unit is at least the scale, and at
// most 2^-10 relatively above it where float16 keeps 11 bits (down to 2^-28 of the largest
// scale), 2^-24 units above it below that.
TEST(ScaleFile, StoredValuesNeverUnderstateAndLoseAtMostOneFloat16Step) {
  const Shape shape{2, 3, 5, 7};
  std::vector<float> v(2 * 3 * 5 * 7);
  std::uint32_t state = 99;
  for (std::size_t i = 0; i < v.size(); ++i) {
    state = state * 1664525u + 1013904223u;
    const double frac = static_cast<double>(state >> 8) / 16777216.0;  // [0, 1)
    v[i] = static_cast<float>(std::ldexp(1.0 + frac, -static_cast<int>(i % 41)) * 3.6e-3);
  }
  v[0] = 7.25e-3f;  // the largest: 1.856 * 2^-8
  v[5] = 0.0f;
  v[6] = std::numeric_limits<float>::quiet_NaN();
  v[7] = INFINITY;
  const Tensor t = float32_tensor(shape, v);
  cases::StoredScale s = cases::store_scale(t);
  ASSERT_EQ(s.values.dtype(), DType::float16);
  ASSERT_EQ(s.values.shape(), shape);
  EXPECT_EQ(s.unit_log2, -8 - 14);  // the largest finite scale lands in [2^14, 2^15)
  const double unit = std::ldexp(1.0, s.unit_log2), largest = 7.25e-3;
  const auto* h = s.values.data<std::uint16_t>();
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double stored = float16_bits_to_float(h[i]) * unit, x = v[i];
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(stored)) << i;
      continue;
    }
    EXPECT_GE(stored, x) << i;
    if (std::isinf(x)) continue;
    const double slack = x >= std::ldexp(largest, -28) ? std::ldexp(x, -10) : std::ldexp(unit, -24);
    EXPECT_LE(stored - x, slack) << i << ": " << x;
  }
  EXPECT_EQ(h[5], 0u);  // an exact zero stays zero: the element's bound keeps only its floor
}

TEST(ScaleFile, AnAllZeroScaleHasUnitOne) {
  cases::StoredScale s = cases::store_scale(float32_tensor({3, 2}, std::vector<float>(6, 0.0f)));
  EXPECT_EQ(s.unit_log2, 0);
  for (std::int64_t i = 0; i < 6; ++i) EXPECT_EQ(s.values.data<std::uint16_t>()[i], 0u);
}

TEST(ScaleFile, TheUnitIsReadFromTheMetadataEntry) {
  EXPECT_EQ(*cases::scale_unit(Json{{"unit_log2", -22}}, DType::float16, "x"), std::ldexp(1.0, -22));
  EXPECT_EQ(*cases::scale_unit(Json::object(), DType::float32, "x"), 1.0);  // sets of an earlier version
  EXPECT_EQ(*cases::scale_unit(Json{{"unit_log2", 3}}, DType::float32, "x"), 8.0);
  auto missing = cases::scale_unit(Json::object(), DType::float16, "s.npy");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("s.npy: a float16 scale needs \"unit_log2\""), std::string::npos) << missing.message();
  for (const Json& bad : {Json{{"unit_log2", 2.5}}, Json{{"unit_log2", "3"}}, Json{{"unit_log2", 127}}, Json{{"unit_log2", -128}},
                          Json{{"unit_log2", std::numeric_limits<std::uint64_t>::max()}}}) {
    auto r = cases::scale_unit(bad, DType::float16, "s.npy");
    ASSERT_FALSE(r) << bad.dump();
    EXPECT_NE(r.message().find("\"unit_log2\" must be an integer in [-127, 126]"), std::string::npos) << r.message();
  }
  EXPECT_FALSE(cases::scale_unit(Json{{"unit_log2", 0}}, DType::float64, "x"));
}
