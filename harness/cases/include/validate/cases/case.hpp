#pragma once
// One reference case: a name, a dtype and the ops it holds, each an op instance (its parameters);
// the default sweep's case is a conv2d plus the matmul that is its im2col GEMM. What an op is —
// its tensors, parameters, references — lives in harness/ops/<op>/ behind ops::registry().
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "conv2d/im2col.hpp"
#include "validate/core/dtype.hpp"
#include "validate/core/result.hpp"
#include "validate/cases/input_dist.hpp"
#include "validate/core/tensor.hpp"
#include "validate/ops/op.hpp"
#include "validate/ops/params_json.hpp"
#include "validate/train/schedule.hpp"

namespace validate::cases {

using ops::ConvParams;
using ops::ConvTransposeParams;
using ops::im2col_gemm;
using ops::kMaxElements;
using ops::MatmulParams;
using ops::Op;
using ops::OpInstance;
using ops::OpParams;
using ops::Role;
using ops::TensorInfo;
using ops::op_name;
using ops::role_name;
// Every tensor name any op has (input, weight, ..., A, B, grad_B): what a policy may select.
const std::vector<std::string>& all_tensor_names();

struct Case {
  std::string name;  // k0072_ic008
  DType dtype = DType::float32;  // logical dtype
  std::vector<OpInstance> ops;   // in run and file order; at most one instance per Op
  // A training case (docs/training.md): every op of the case runs this many optimizer steps, each
  // on a new batch; its tensors then include the loss curve and the checkpoints.
  std::optional<train::TrainConfig> train;
  // What the inputs are drawn from (input_dist.hpp), by tensor name or "<op>.<tensor>"; empty for
  // every case made before distributions existed (then each input is today's normal fill).
  InputDists input_dists;

  // The distribution of an op's input tensor: "<op>.<tensor>" first, then "<tensor>"; null when
  // neither is given (the normal fill).
  const InputDist* input_dist(Op op, const std::string& tensor) const;
  // Whether an input of the op (the target included) is read from a user's file: generated fills
  // draw every element alike, a user's tensor may be ordered along a sum (docs/compare.md,
  // "Partial sums on the data at hand").
  bool has_user_tensor(Op op) const;

  bool has(Op op) const { return find(op) != nullptr; }
  const OpInstance* find(Op op) const;
  // The parameters of P's op; the op must be present (an internal invariant, asserted).
  template <class P>
  const P& params() const {
    return std::get<P>(find_asserted(ops::op_of<P>()).params);
  }
  // Mutable access for building cases: adds P's op (default parameters) when absent.
  template <class P>
  P& params() {
    const OpInstance* have = find(ops::op_of<P>());
    if (!have) {
      ops.push_back(OpInstance{P{}});
      return std::get<P>(ops.back().params);
    }
    return std::get<P>(const_cast<OpInstance*>(have)->params);
  }
  void drop(Op op);
  // The default sweep's pairing: this conv2d and its im2col matmul.
  static Case conv_with_im2col(std::string name, const ConvParams& conv);

  // Every tensor of the op in file order: inputs first (target is an input), then output, loss,
  // grads; a training case then has train_loss and, per checkpoint step, each parameter and its
  // gradient (train/tensor_names.hpp).
  std::vector<TensorInfo> tensors(Op op) const;
  std::vector<TensorInfo> parameters(Op op) const;  // the inputs an optimizer updates
  std::vector<TensorInfo> inputs(Op op) const;    // role input
  std::vector<TensorInfo> produced(Op op) const;  // output, loss, grads
  // The dtype a tensor of this case is stored in: float32 for the loss, the loss curve and a
  // training checkpoint of a parameter (the optimizer's float32 master copy, docs/training.md
  // "Mixed precision": a float16 master would lose every update below half an ULP), the case's
  // storage dtype (core/dtype.hpp storage_dtype) for everything else.
  DType storage(const TensorInfo& t) const;
  // A training checkpoint of a parameter (step<k>_weight): the float32 master copy, whose values
  // are float32's whatever the case dtype (compare must not round them to it).
  static bool master_copy(Role role, const std::string& name);
  // "<case>_<op>_<tensor>.npy"
  std::string file_name(Op op, const std::string& tensor) const;
  // Whether generate stores an error-bound scale beside the tensor (<tensor>_scale): every output
  // and gradient, and the checkpoints of an SGD trajectory (docs/compare.md, "Error bounds",
  // "Checkpoint bounds"; Adam's checkpoints keep the fixed gate).
  bool has_bound_scale(const TensorInfo& t) const;

 private:
  const OpInstance& find_asserted(Op op) const;
};

// The default sweep's naming: k{K:04d}_ic{ic:03d}.
std::string default_case_name(const ConvParams& c);

// Checks on geometry read from files written by others (case files and `<case>_metadata.json`)
// before anything divides by a stride or multiplies sizes: the op's own check (ops::OpDef::check).
// `where` starts the message.
Status check_conv(const ConvParams& c, const std::string& where);
Status check_matmul(const MatmulParams& m, const std::string& where);
Status check_op(const OpInstance& op, const std::string& where);
// Every key of c.inputs names an input tensor of one of its ops (a did-you-mean otherwise), and a
// training case's data inputs (drawn anew each step) are not read from a file.
Status check_input_dists(const Case& c, const std::string& where);
// Case names become file names: letters, digits, '_', '-', '.', at most 100, no path.
Status check_case_name(const std::string& name, const std::string& where);

}  // namespace validate::cases
