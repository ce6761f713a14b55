// bfloat16 by truncation, the classic hand-written converter the rounding-bias check is there to
// catch: the float32 value with its low 16 bits dropped (rounded toward zero).
#pragma once

#include <cstdint>
#include <cstring>

namespace validate::testing {

inline float bfloat16_truncated(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, 4);
  b &= 0xFFFF0000u;
  std::memcpy(&v, &b, 4);
  return v;
}

}  // namespace validate::testing
