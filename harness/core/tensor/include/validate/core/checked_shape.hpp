#pragma once
// Element counts that cannot wrap: a shape from a command line or a file multiplied out unchecked
// ([65536]^4) wrapped to 0 elements. shape_numel (tensor.hpp) saturates at INT64_MAX on overflow,
// so every "more than N elements" check refuses such a shape; these name the overflow instead.
#include <cstdint>
#include <optional>

#include "validate/core/tensor.hpp"

namespace validate {

// a * b, or nothing when a size is negative or the product does not fit in int64.
std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b);
// The element count, or nothing when a size is negative or the product overflows int64.
std::optional<std::int64_t> checked_numel(const Shape& shape);

}  // namespace validate
