#pragma once
// ULP distance in a tensor's logical dtype. A float's bits are sign-magnitude; mapping them to a
// two's-complement-ordered integer (negatives mirrored below zero) makes adjacent representable
// values differ by exactly 1, so the distance between two values is the difference of their
// ordered integers. +0 and -0 both map to 0 (distance 0), the smallest subnormals sit at +-1, and
// a sign change counts every representable value in between (1 ULP from -min_subnormal to +0).
//
// The trap this guards against: a bfloat16 case is *stored* as float32. Measuring its ULPs on the
// float32 bits would call a one-bfloat16-ULP difference 65536 ULPs, so values are first rounded
// (nearest even) to the logical dtype's bit pattern and measured there.
//
// These are the scalar definitions; the streaming kernel (metrics.cpp) computes the same thing
// with integer vector operations and is tested against them.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "validate/core/dtype.hpp"

namespace validate::compare {

// Ordered integer of a float32 bit pattern (NaN is not ordered: callers exclude it).
inline std::int64_t ordered_f32(std::uint32_t bits) {
  const std::int64_t mag = bits & 0x7fffffffu;
  return (bits & 0x80000000u) ? -mag : mag;
}

// Ordered integer of a 16-bit (bfloat16 or float16) bit pattern.
inline std::int64_t ordered_16(std::uint16_t bits) {
  const std::int64_t mag = bits & 0x7fffu;
  return (bits & 0x8000u) ? -mag : mag;
}

// Position of float value `x` on the ordered integer line of `logical` (x rounded to nearest even
// in that dtype first; float64 is measured as float32, the finest dtype a reference stores).
inline std::int64_t ordered_index(float x, DType logical) {
  switch (logical) {
    case DType::bfloat16:
      return ordered_16(float_to_bfloat16_bits(x));
    case DType::float16:
      return ordered_16(float_to_float16_bits(x));
    default: {
      std::uint32_t u;
      std::memcpy(&u, &x, 4);
      return ordered_f32(u);
    }
  }
}

// |ordered(a) - ordered(b)| in the logical dtype. Both must be non-NaN; infinities are ordered
// one past the largest finite value, as in the bit patterns.
inline std::uint64_t ulp_distance(float a, float b, DType logical) {
  const std::int64_t d = ordered_index(a, logical) - ordered_index(b, logical);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

// Distance between two values already given as 16-bit patterns of the same dtype.
inline std::uint64_t ulp_distance_bits16(std::uint16_t a, std::uint16_t b) {
  const std::int64_t d = ordered_16(a) - ordered_16(b);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

// The spacing of float32 at |x| (the ULP of the float32 nearest |x|), as a double: the rounding
// one stored float32 parameter carries, for the training checkpoints' update tolerances.
inline double float32_ulp(double x) {
  const float f = static_cast<float>(std::fabs(x));
  return static_cast<double>(std::nextafter(f, std::numeric_limits<float>::infinity())) - static_cast<double>(f);
}

// A max_ulp gate (a double from a policy or --gate) as the integer limit the kernels compare with.
// No two floats of any dtype are 2^32 ULPs apart, so anything at or above that (1e20, inf) means
// "any distance" and becomes the largest limit; a plain cast of 1e20 or inf is undefined and gave
// 0 on x86, which failed every element of a clean run. NaN never reaches here (policy refuses it).
inline std::uint64_t ulp_limit(double gate) {
  if (!(gate < 4294967296.0)) return ~std::uint64_t{0};
  return gate <= 0 ? 0 : static_cast<std::uint64_t>(gate);
}

}  // namespace validate::compare
