#pragma once
// What an op is, independent of which op: its id, the roles and canonical axes of its tensors,
// and its parameters as one closed variant (a component that switches over it with std::visit and
// forgets an op does not compile). Everything op-specific lives in harness/ops/<op>/.
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "conv2d/params.hpp"
#include "conv_transpose2d/params.hpp"
#include "matmul/params.hpp"
#include "validate/core/tensor.hpp"

namespace validate::ops {

// Registration (1 of 2): the op's id. The second is its line in src/registry.cpp.
enum class Op { conv2d, matmul, conv_transpose2d };
using OpParams = std::variant<ConvParams, MatmulParams, ConvTransposeParams>;

// The Op a parameter struct belongs to (OpParams alternative i is Op i).
template <class P>
constexpr Op op_of() {
  if constexpr (std::is_same_v<P, ConvParams>) return Op::conv2d;
  else if constexpr (std::is_same_v<P, MatmulParams>) return Op::matmul;
  else {
    static_assert(std::is_same_v<P, ConvTransposeParams>, "not an op's parameter struct");
    return Op::conv_transpose2d;
  }
}

inline Op op_of(const OpParams& p) { return static_cast<Op>(p.index()); }

// input/output/loss/grad: one forward/backward step. A training case (docs/training.md) adds
// loss_curve (the loss of every step, "train_loss") and checkpoint (a parameter or its gradient at a
// checkpoint step, "step<k>_weight", "step<k>_grad_weight"): both produced by a runner.
enum class Role { input, output, loss, grad, loss_curve, checkpoint };
const char* role_name(Role r);
const char* op_name(Op op);  // "conv2d", "matmul", "conv_transpose2d"
// Every role, in enum order; and the role a name (role_name) stands for. Names are the boundary
// (metadata, policy files, reports): inside, roles travel as the enum.
const std::vector<Role>& all_roles();
std::optional<Role> role_from_name(std::string_view name);

struct TensorInfo {
  std::string name;            // "input", "weight", "grad_A", ...
  Role role;
  std::string canonical_axes;  // "NCHW", "OIHW", "IOHW", "O", "MK", "KN", "MN", "" (scalar)
  Shape shape;                 // canonical shape
  // A trainable parameter (weight, bias, B): the optimizer updates it in a training case; the
  // other inputs (input, A, target) are data, drawn anew at every step.
  bool parameter = false;
};

// One op of a case: its parameters (the Op is the variant's alternative).
struct OpInstance {
  OpParams params;
  Op op() const { return op_of(params); }
};

}  // namespace validate::ops
