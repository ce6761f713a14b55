#pragma once
// The metadata hash of a tensor: its values as little-endian float32 in C order (float16 and
// float64 data are converted to float32 first), as docs/formats.md defines it; the same digest as
// the payload hash of a float32 .npy (sha256_pair.hpp).
#include <string>

#include "validate/core/tensor.hpp"

namespace validate {

std::string tensor_sha256(const Tensor& t);

}  // namespace validate
