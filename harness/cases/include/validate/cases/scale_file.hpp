#pragma once
// How a reference set stores an error-bound scale (docs/formats.md, "scales"): float16 values
// times 2^unit_log2, each rounded up, so a stored scale never understates the one generate
// computed (a bound made from it is never tighter) and costs half the bytes of float32. The unit
// puts the tensor's largest scale in [2^14, 2^15): the rest keeps float16's 11 significant bits
// down to 2^-28 of it, and below that an absolute step of 2^-38 of it (the near-zero end, where
// the bound's own floor dominates).
#include <optional>
#include <string>
#include <string_view>

#include "validate/core/json_io.hpp"
#include "validate/core/result.hpp"
#include "validate/core/tensor.hpp"

namespace validate::cases {

struct StoredScale {
  Tensor values;      // float16, the scale's shape
  int unit_log2 = 0;  // scale = value * 2^unit_log2
};
// `scale` is a float32 tensor of non-negative values (NaN and +inf stay what they are).
StoredScale store_scale(const Tensor& scale);

// Whether a name from torch_compute's results is a scale ("<tensor>_scale") or a gradient's stored
// dL/dy choice term ("<tensor>_choice", stored the same way), not a tensor.
bool is_scale_name(std::string_view name);

// The unit of a scale file, from its metadata entry `entry` (ops.<op>.scales.<tensor>) and the
// file's storage: float16 needs an integer unit_log2, float32 may have one (1 without). `what`
// names the entry in the message.
Result<double> scale_unit(const Json& entry, DType storage, const std::string& what);

}  // namespace validate::cases
