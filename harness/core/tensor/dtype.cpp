#include "validate/core/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace validate {

std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::float32: return "float32";
    case DType::bfloat16: return "bfloat16";
    case DType::float16: return "float16";
    case DType::float64: return "float64";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name == "float32" || name == "f32" || name == "fp32") return DType::float32;
  if (name == "bfloat16" || name == "bf16") return DType::bfloat16;
  if (name == "float16" || name == "f16" || name == "fp16" || name == "half") return DType::float16;
  if (name == "float64" || name == "f64" || name == "fp64" || name == "double") return DType::float64;
  return std::nullopt;
}

std::size_t dtype_size(DType d) {
  switch (d) {
    case DType::float32: return 4;
    case DType::bfloat16: return 2;
    case DType::float16: return 2;
    case DType::float64: return 8;
  }
  return 0;
}

DType storage_dtype(DType logical) {
  return logical == DType::bfloat16 ? DType::float32 : logical;
}

// Always inlined: the conversion loops below are compiled for several ISAs (target_clones), and
// GCC does not inline a plain function into a clone by itself; called, they run 4x slower.
#define VALIDATE_INLINE inline __attribute__((always_inline))
static VALIDATE_INLINE std::uint32_t bits_of(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
static VALIDATE_INLINE float float_of(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

std::uint16_t float_to_bfloat16_bits(float x) {
  std::uint32_t u = bits_of(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  // Adding 0x7fff plus the lowest kept bit rounds ties to even; overflow carries into inf correctly.
  std::uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return static_cast<std::uint16_t>(u >> 16);
}

float bfloat16_bits_to_float(std::uint16_t bits) { return float_of(static_cast<std::uint32_t>(bits) << 16); }

void round_to_bfloat16_inplace(float* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t u;
    std::memcpy(&u, p + i, 4);
    // As float_to_bfloat16_bits: ties to even by adding 0x7fff plus the lowest kept bit; a NaN
    // keeps its upper half with the quiet bit set.
    const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    const std::uint32_t quiet = (u | 0x00400000u) & 0xffff0000u;
    const std::uint32_t r = (u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded;
    std::memcpy(p + i, &r, 4);
  }
}

namespace {

// Branch-free selection, so the loops below vectorize (a ?: on several conditions does not).
VALIDATE_INLINE std::uint32_t mask_of(bool c) { return 0u - static_cast<std::uint32_t>(c); }
VALIDATE_INLINE std::uint32_t select(std::uint32_t mask, std::uint32_t a, std::uint32_t b) { return (a & mask) | (b & ~mask); }

// x rounded to float16 toward +infinity: a magnitude is rounded up for x >= 0 and down (toward
// zero) for x < 0.
VALIDATE_INLINE std::uint16_t float16_bits_up(float x) {
  const std::uint32_t u = bits_of(x), a = u & 0x7fffffffu, neg = u >> 31, negm = 0u - neg;
  // float16's normal range (|x| >= 2^-14): rebias the exponent (127 -> 15), then drop 13
  // mantissa bits, adding 2^13 - 1 first to round a magnitude up; a carry lands in the exponent.
  const std::uint32_t normal = ((a - 0x38000000u) + (0x1fffu & ~negm)) >> 13;
  // Below it, float16 counts units of 2^-24: |x| 2^24 (exact: a power of two; clamped to the
  // range so nothing overflows) to the integer above or below it.
  const float mag = float_of(select(mask_of(a < 0x38800000u), a, 0x38800000u));
  const float s = mag * 0x1p24f;
  const float r = (s + 0x1p23f) - 0x1p23f;  // the nearest integer (0 <= s <= 1024)
  const std::uint32_t ri = static_cast<std::uint32_t>(static_cast<std::int32_t>(r));
  const std::uint32_t sub = ri + (mask_of(r < s) & ~negm & 1u) - (mask_of(r > s) & negm & 1u);
  std::uint32_t m = select(mask_of(a >= 0x38800000u), normal, sub);
  const std::uint32_t cap = 0x7c00u - neg;  // +inf; for a negative x, -65504
  m = select(mask_of(m > cap), cap, m);
  const std::uint32_t special = select(mask_of(a == 0x7f800000u), 0x7c00u, 0x7e00u);  // inf, NaN
  m = select(mask_of(a >= 0x7f800000u), special, m);
  return static_cast<std::uint16_t>((neg << 15) | m);
}

}  // namespace

// Compiled for AVX-512 and AVX2 as well, chosen at load time: generate converts every scale it
// writes (0.8 GB of float32 on the default float32 sweep), and the baseline's SSE2 loop was 4% of
// its CPU. The same operations in every clone, so the same bits (the only product followed by a
// sum, |x| 2^24 + 2^23, is exact, so a fused multiply-add rounds it the same).
__attribute__((target_clones("avx512f", "avx2", "default")))
void float_to_float16_up(const float* in, std::uint16_t* out, std::size_t n, float multiplier) {
  for (std::size_t i = 0; i < n; ++i) {
    // A product outside float's range rounds to 0 or to inf, where the direction matters: a
    // positive value that became 0 rounds up to float16's smallest subnormal, as float's smallest
    // does; a finite value that became inf is float's largest of its sign (-65504 for a negative).
    const float p = in[i] * multiplier;
    const std::uint32_t pb = bits_of(p), ib = bits_of(in[i]);
    const std::uint32_t lost_low = mask_of(p == 0.0f) & mask_of(in[i] > 0.0f);
    const std::uint32_t lost_high = mask_of((pb & 0x7fffffffu) == 0x7f800000u) & mask_of((ib & 0x7fffffffu) < 0x7f800000u);
    const std::uint32_t q = select(lost_low, 1u, select(lost_high, (pb & 0x80000000u) | 0x7f7fffffu, pb));
    out[i] = float16_bits_up(float_of(q));
  }
}

void float16_to_float(const std::uint16_t* in, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t h = in[i], em = h & 0x7fffu, sign = (h & 0x8000u) << 16;
    // Subnormals as an integer count of 2^-24 (no float denormal arithmetic), normals rebiased,
    // inf and NaN with their payload.
    const float sub = static_cast<float>(static_cast<std::int32_t>(em)) * 0x1p-24f;
    std::uint32_t b = select(mask_of(em < 0x400u), bits_of(sub), (em << 13) + 0x38000000u);
    b = select(mask_of(em >= 0x7c00u), 0x7f800000u | ((em & 0x3ffu) << 13), b);
    out[i] = float_of(b | sign);
  }
}

std::uint16_t float_to_float16_bits(float x) {
  std::uint32_t u = bits_of(x);
  std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {
    // Result is subnormal or zero in half: value = a_float / 2^-24 rounded to nearest even integer.
    if (a < 0x33000000u) return sign;  // below half of the smallest subnormal (2^-25): zero
    std::uint32_t exp = a >> 23;
    std::uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    // value = mant * 2^(exp-150); in units of 2^-24: mant * 2^(exp-126)
    int shift = 126 - static_cast<int>(exp);  // >= 1 here
    std::uint32_t q = mant >> shift;
    std::uint32_t rem = mant & ((1u << shift) - 1u);
    std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<std::uint16_t>(sign | q);
  }
  // Normal: rebias exponent (127 -> 15) and round 13 dropped mantissa bits to nearest even.
  std::uint32_t lsb = (a >> 13) & 1u;
  a += 0xfffu + lsb;
  a -= (127u - 15u) << 23;
  return static_cast<std::uint16_t>(sign | (a >> 13));
}

float float16_bits_to_float(std::uint16_t h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return float_of(sign);
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return float_of(sign | 0x7f800000u | (mant << 13));
  return float_of(sign | ((exp + 112u) << 23) | (mant << 13));
}

float round_to_dtype(float x, DType logical) {
  switch (logical) {
    case DType::bfloat16: return bfloat16_bits_to_float(float_to_bfloat16_bits(x));
    case DType::float16: return float16_bits_to_float(float_to_float16_bits(x));
    default: return x;
  }
}

namespace {
// 2^k for -1022 <= k <= 1023, from its bits.
double power_of_two(int k) {
  const std::uint64_t bits = static_cast<std::uint64_t>(k + 1023) << 52;
  double d = 0;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}
}  // namespace

double round_to_dtype(double x, DType logical) {
  if (logical == DType::float64 || !std::isfinite(x) || x == 0) return x;
  if (logical == DType::float32) return static_cast<float>(x);  // one IEEE rounding
  // Significand bits, exponent of the smallest subnormal spacing, largest finite value.
  const int digits = logical == DType::bfloat16 ? 8 : 11;
  const int min_q = logical == DType::bfloat16 ? -133 : -24;
  const double largest = logical == DType::bfloat16 ? 0x1.fep127 : 65504.0;
  // frexp's exponent read from the bits (|x| = f 2^e, f in [0.5, 1)): frexp and ldexp were a third
  // of compare's time where the diagnosis recomputes sums of bfloat16 operands. A double subnormal
  // (biased exponent 0) lies far below either dtype's smallest spacing, where only min_q counts.
  std::uint64_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  const int e = static_cast<int>((bits >> 52) & 0x7ffu) - 1022;
  const int q = std::max(e - digits, min_q);  // spacing of the dtype's values near x: -133 <= q <= 1016
  // Both scalings are by powers of two within double's normal range: exact; ties to even.
  const double r = std::nearbyint(x * power_of_two(-q)) * power_of_two(q);
  return std::fabs(r) > largest ? std::copysign(HUGE_VAL, x) : r;
}

}  // namespace validate
