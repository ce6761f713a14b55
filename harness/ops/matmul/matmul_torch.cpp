// matmul's LibTorch forward (compiled into validate_ops_torch only).
#include "validate/ops/torch_forward.hpp"

namespace validate::ops {

at::Tensor torch_forward(const MatmulParams&, const TorchLeaves& in) { return torch::matmul(in.at("A"), in.at("B")); }

}  // namespace validate::ops
