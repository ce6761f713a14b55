#pragma once
// conv2d and conv_transpose2d through cuDNN's convolution API (conv_geometry.hpp says how the
// transposed op maps onto it): one case's plans, descriptors, device buffers and execution
// (forward, bias, loss, backward data/filter/bias), shared by the single step
// (conv.cpp), the descriptor and algorithm set-up (conv_setup.cpp), the buffers and execution
// (conv_case.cpp) and the training trajectory (conv_train.cpp). docs/cudnn.md describes the layout
// mapping; the comments say why each step is the way it is.
#include <map>
#include <string>
#include <vector>

#include "bias.hpp"
#include "conv_geometry.hpp"
#include "device_param.hpp"
#include "device_trajectory.hpp"
#include "internal.hpp"
#include "validate/gpu/sgd.hpp"
#include "validate/layout/convert.hpp"

namespace validate::runners::cudnn_detail {

// How one activation tensor reaches cuDNN.
struct ActPlan {
  layout::Spec stack;                 // the layout of the device buffer cuDNN reads or writes
  std::string path;                   // native | strided | converted
  std::string format;                 // NCHW | NHWC | strided
  std::vector<std::int64_t> strides;  // per canonical axis n, c, h, w (strided)
};

// cuDNN describes an activation by a format (NCHW, NHWC) or by explicit positive strides. A layout
// whose memory walks N,C,H,W or N,H,W,C is native; any other permutation is expressible as strides
// (CHWN:F is NWHC memory: n = C·H·W, c = 1, h = C, w = C·H); a flip is not (cuDNN strides are
// positive), so a flipped activation is converted to NCHW on the device. `convert` (the fallback
// when cuDNN offers no algorithm for the layouts as given) converts everything but NCHW itself.
ActPlan plan_activation(const layout::Spec& s, const Shape& shape, bool convert);

// cuDNN filters have no strides: KCRS (NCHW format, memory O,I,H,W) or KRSC (NHWC format, memory
// O,H,W,I). A flip stays in the data either way: in CUDNN_CONVOLUTION mode it is what makes the
// result PyTorch's cross-correlation, so a conversion reorders memory but keeps the flip.
struct FilterPlan {
  layout::Spec stack;
  std::string path;  // native | converted
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
};

// `axes`: the weight's canonical axes, OIHW (conv2d) or IOHW (conv_transpose2d); either is
// cuDNN's K, C, R, S in that order.
FilterPlan plan_filter(const layout::Spec& s, const Shape& shape, bool convert,
                       const std::string& axes = "OIHW");

// The layout of the bytes cuDNN writes for dW: the filter descriptor's memory order, with the
// flip of the buffer it was given (dL/dF for F = W flipped is dL/dW flipped: docs/layouts.md).
layout::Spec cudnn_grad_weight_spec(const FilterPlan& f, const layout::Spec& weight,
                                    const std::string& axes = "OIHW");

// Why an execution failed, for the algorithm selection: which direction's call, and whether cuDNN
// said "not supported" (try the next candidate) rather than failed.
struct Failure {
  bool set = false;
  Direction direction = Direction::fwd;
  bool not_supported = false;
};

class ConvCase {
 public:
  ConvCase(Context& ctx, const OpTask& task)
      : ctx_(ctx),
        task_(task),
        g_(task.op == cases::Op::conv_transpose2d
               ? conv_geometry(task.c->params<ops::ConvTransposeParams>())
               : conv_geometry(task.c->params<cases::ConvParams>())) {}
  const ConvGeometry& geometry() const { return g_; }

  // Plans, descriptors and algorithm candidates; falls back to converting every non-native layout
  // when cuDNN refuses the layouts as given or offers no algorithm for them (choose_layouts).
  // Then uploads the inputs, allocates the results and probes the bias calls.
  Status setup(nlohmann::json& info);
  // The NCHW fallback taken after setup: when no candidate the heuristics listed for the layouts
  // as given is supported when executed. False (nothing done) when there is nothing to convert
  // or the fallback was taken already.
  Result<bool> fall_back(const std::string& why, nlohmann::json& info);
  // Every usable algorithm per direction, in cuDNN's heuristic order.
  const AlgoTable& table() const { return table_; }
  // One forward + loss + backward pass with these algorithms; the results in canonical layout.
  // On failure, last_failure() says which direction's call failed and whether it was "not
  // supported".
  Result<std::map<std::string, Tensor>> execute(const Combo& combo, nlohmann::json* timing);
  // execute's device half: forward, bias, loss, backward data/filter/bias; nothing read back.
  Status pass(const Combo& combo, nlohmann::json* timing);
  const Failure& last_failure() const { return failure_; }
  // How the activations and the filter reach cuDNN: "native", "strided" or "converted" (the run's
  // notes; run_info.json gathers them per op under "paths").
  std::map<std::string, std::string> paths() const {
    std::string act = "native";
    for (const ActPlan* a : {&xp_, &yp_, &dxp_}) {
      if (a->path == "converted")
        act = "converted";
      else if (a->path == "strided" && act == "native")
        act = "strided";
    }
    return {{"activation", act}, {"filter", wp_.path}};
  }

  // --- The training trajectory (conv_train.cpp) ---
  // Replaces the device copy of "input", "target", "weight" or "bias" with `host` (canonical,
  // storage dtype), converted to the layout and dtype that buffer already has; a parameter also
  // restarts its optimizer (and its float32 master in mixed precision).
  Status reload(const std::string& name, const Tensor& host);
  // The loss of the last pass (synchronises).
  Result<float> loss_value() const;
  // The weight (and bias) as the optimizer holds them (the float32 masters in mixed precision)
  // and their gradients as execute reports them (grad_weight through the declared grad_weight
  // layout, storage dtype), canonical.
  Result<std::map<std::string, Tensor>> read_parameters();
  // The optimizer step (SGD or Adam, c.optimizer) on the weight buffer with cuDNN's dW, both in the
  // filter's layout (an error if the two buffers do not share one memory layout), and on the bias;
  // the optimizer state lives here, restarted by reload.
  Status update(const train::TrainConfig& c);
  // The layout the weight buffer and dW share on the device (for info).
  const layout::Spec& filter_buffer_spec() const { return w_buf_.spec; }

 private:
  Result<Tensor> grad_weight_as_declared();
  Status build(bool convert, nlohmann::json& info);
  Status query(Direction d);
  Status set_activation(TensorDesc& d, const ActPlan& p, const Shape& s);
  // A cuDNN direction's two activation operands, descriptors and buffers of the op tensors
  // operand_tensors (conv_geometry.hpp) names.
  struct Operands {
    const TensorDesc* desc[2];
    DeviceTensor* buf[2];
  };
  Operands operands(Direction d);
  Status allocate_and_upload();
  Status probe_bias(nlohmann::json& info);
  bool nothing_to_convert() const;
  cudnnMathType_t requested_math() const;
  // Runs one cuDNN call of `combo`'s direction d; records the failure for the selection.
  Status direction_call(Direction d, cudnnStatus_t st, const char* call);
  ActivationGeometry geometry(const ActPlan& p) const;

  Context& ctx_;
  const OpTask& task_;
  ConvGeometry g_;
  bool convolution_mode_ = false;  // CUDNN_CONVOLUTION, else CUDNN_CROSS_CORRELATION
  DType dt_ = DType::float32;
  Shape xs_, ws_, ys_, bs_;
  layout::Spec in_spec_, w_spec_, out_spec_, gi_spec_, gw_spec_;
  ActPlan xp_, yp_, dxp_;
  FilterPlan wp_;
  TensorDesc xd_, yd_, dxd_, bd_;
  FilterDesc wd_;
  ConvDesc conv_;
  AlgoTable table_;
  bool fell_back_ = false;
  bool own_bias_add_ = false, own_bias_grad_ = false;  // cuDNN's legacy bias calls refused
  Failure failure_;
  DeviceTensor x_, w_buf_, b_, t_buf_, y_, dy_, dx_, dw_, db_;
  gpu::DeviceBuffer loss_, scratch_;
  DeviceParam w_opt_, b_opt_;  // the optimizer of a training trajectory
};

// A training case (conv_train.cpp): runs `plan`'s trajectory on the device with `combo`'s
// algorithms — every step's batch uploaded in the case's layouts, forward, loss, backward, the SGD
// update of the weight in the filter layout cuDNN reads and writes — and adds train_loss and the
// checkpoints to r.outputs; r.info["training"] says how it ran.
Status train_conv(ConvCase& cc, const OpTask& task, const TrainPlan& plan, const Combo& combo,
                  OpResult& r);

}  // namespace validate::runners::cudnn_detail
