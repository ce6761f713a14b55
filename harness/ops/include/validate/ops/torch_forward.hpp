#pragma once
// Each op's LibTorch forward, for the LibTorch reference (generate/torch_reference.cpp) and the
// torch runner. Include only from a *_torch.cpp file: it pulls in LibTorch's headers, and every
// other translation unit must stay free of them (the compare-only build, the on-demand modules).
#include <map>
#include <string>

#include <torch/torch.h>

#include "validate/ops/op.hpp"

namespace validate::ops {

// The op's input leaves by tensor-table name ("bias" absent when the op has none).
using TorchLeaves = std::map<std::string, at::Tensor>;

// One overload per op, each in <op>/<op>_torch.cpp; torch_forward(OpParams) visits them, so an op
// without one does not compile.
at::Tensor torch_forward(const ConvParams& p, const TorchLeaves& in);
at::Tensor torch_forward(const MatmulParams& p, const TorchLeaves& in);
at::Tensor torch_forward(const ConvTransposeParams& p, const TorchLeaves& in);

inline at::Tensor torch_forward(const OpParams& p, const TorchLeaves& in) {
  return std::visit([&](const auto& params) { return torch_forward(params, in); }, p);
}

}  // namespace validate::ops
