#include "validate/cases/scale_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "validate/core/dtype.hpp"

namespace validate::cases {

StoredScale store_scale(const Tensor& scale) {
  const float* p = scale.data<float>();
  const std::int64_t n = scale.numel();
  float most = 0;  // the largest finite value (a branch-free loop: NaN and inf compare false)
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = p[i] < INFINITY ? p[i] : 0.0f;
    most = v > most ? v : most;
  }
  StoredScale s;
  // 2^-unit_log2 must be a float: the unit stays in [2^-127, 2^126] (a largest scale below
  // 2^-113 then sits lower in float16's range).
  s.unit_log2 = most > 0 ? std::clamp(std::ilogb(most) - 14, -127, 126) : 0;
  s.values = Tensor::uninitialized(DType::float16, scale.shape());
  float_to_float16_up(p, s.values.data<std::uint16_t>(), static_cast<std::size_t>(n),
                      std::ldexp(1.0f, -s.unit_log2));
  return s;
}

bool is_scale_name(std::string_view name) {
  for (std::string_view suffix : {std::string_view("_scale"), std::string_view("_choice")})
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) return true;
  return false;
}

Result<double> scale_unit(const Json& entry, DType storage, const std::string& what) {
  const Json* u = entry.is_object() && entry.contains("unit_log2") ? &entry["unit_log2"] : nullptr;
  if (storage != DType::float32 && storage != DType::float16)
    return Error{what + ": a scale is stored as float16 or float32, not " + std::string(dtype_name(storage))};
  if (!u) {
    if (storage == DType::float32) return 1.0;
    return Error{what + ": a float16 scale needs \"unit_log2\" (docs/formats.md)"};
  }
  if (!u->is_number_integer() || u->get<double>() < -127 || u->get<double>() > 126)
    return Error{what + ": \"unit_log2\" must be an integer in [-127, 126] (store_scale's range)" +
                 (u->is_number_integer() ? ", got " + u->dump() : ", got a " + std::string(u->type_name()))};
  return std::ldexp(1.0, static_cast<int>(u->get<std::int64_t>()));
}

}  // namespace validate::cases
