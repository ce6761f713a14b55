#pragma once
// The exec protocol's tensor files (docs/runners.md): what the harness expects a file to be, and
// reading a result the program wrote back into a canonical tensor, refusing anything that is not
// exactly the declared dtype, shape and layout.
#include <string>

#include "validate/cases/case.hpp"
#include "validate/core/result.hpp"
#include "validate/core/tensor.hpp"
#include "validate/layout/spec.hpp"

namespace validate::runners::exec {

struct Expected {
  cases::TensorInfo info;
  layout::Spec spec;
  DType dtype;
  std::string file;  // relative to the work directory: "<tensor>.bin" or "<tensor>.npy"
};

// "float32 [2, 9, 7, 6] in layout NHWC"
std::string describe(const Expected& e);

// One result file -> canonical tensor. Messages start with the file name. lstat, not stat: a
// symlink (to /dev/zero, to a file outside the work dir), FIFO or directory is refused by name.
Result<Tensor> read_result(const std::string& dir, const Expected& e, bool npy_format);

}  // namespace validate::runners::exec
