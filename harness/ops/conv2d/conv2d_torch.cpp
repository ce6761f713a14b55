// conv2d's LibTorch forward (compiled into validate_ops_torch only).
#include "validate/ops/torch_forward.hpp"

namespace validate::ops {

at::Tensor torch_forward(const ConvParams& p, const TorchLeaves& in) {
  auto b = in.find("bias");
  return torch::conv2d(in.at("input"), in.at("weight"), b == in.end() ? at::Tensor() : b->second,
                       {p.stride[0], p.stride[1]}, {p.padding[0], p.padding[1]}, {p.dilation[0], p.dilation[1]},
                       p.groups);
}

}  // namespace validate::ops
