// The element path's shared pieces: per-load rounding, reading one stored value, operand slots.
#include "validate/ops/element.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace validate::ops {

namespace {
// Rounds away the low `drop_bits` of the float32 mantissa, to nearest, ties to even.
float round_mantissa(float x, int drop_bits) {
  if (!std::isfinite(x)) return x;
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  const std::uint32_t half = 1u << (drop_bits - 1), lsb = (u >> drop_bits) & 1u;
  u = (u + half - 1 + lsb) & ~((1u << drop_bits) - 1);
  std::memcpy(&x, &u, 4);
  return x;
}
}  // namespace

float round_load(float x, LoadRounding r) {
  switch (r) {
    case LoadRounding::tf32: return round_mantissa(x, 13);  // 23 - 10 mantissa bits
    case LoadRounding::bfloat16: return round_to_dtype(x, DType::bfloat16);
    case LoadRounding::float16: return round_to_dtype(x, DType::float16);
    case LoadRounding::none: return x;
  }
  return x;
}

float element_value(const void* data, DType storage, std::int64_t i) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  switch (storage) {
    case DType::float16: {
      std::uint16_t h;
      std::memcpy(&h, bytes + i * 2, 2);
      return float16_bits_to_float(h);
    }
    case DType::float64: {
      double d;
      std::memcpy(&d, bytes + i * 8, 8);
      return static_cast<float>(d);
    }
    default: {  // float32, and bfloat16 (stored as float32 bytes)
      float f;
      std::memcpy(&f, bytes + i * 4, 4);
      return f;
    }
  }
}

const ElementOperand& ElementOperands::operator[](std::string_view n) const {
  for (std::size_t s = 0; s < kSlots; ++s)
    if (name[s] && n == name[s]) return slot[s];
  throw std::out_of_range("no element operand named " + std::string(n));
}

ElementOperand& ElementOperands::operator[](std::string_view n) {
  return const_cast<ElementOperand&>(static_cast<const ElementOperands&>(*this)[n]);
}

}  // namespace validate::ops
