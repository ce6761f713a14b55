// conv2d through cuDNN's convolution API: forward, backward data, backward filter, backward bias,
// with the loss and dL/dy computed on the device between them. docs/cudnn.md describes the layout
// mapping; the comments here say why each step is the way it is.
#include <algorithm>
#include <climits>
#include <optional>

#include <fmt/format.h>

#include "bias.hpp"
#include "internal.hpp"
#include "validate/gpu/permute.hpp"
#include "validate/layout/convert.hpp"

namespace validate::runners::cudnn_detail {

namespace {

using layout::Spec;

// How one activation tensor reaches cuDNN.
struct ActPlan {
  Spec stack;                         // the layout of the device buffer cuDNN reads or writes
  std::string path;                   // native | strided | converted
  std::string format;                 // NCHW | NHWC | strided
  std::vector<std::int64_t> strides;  // per canonical axis n, c, h, w (strided)
};

// cuDNN describes an activation by a format (NCHW, NHWC) or by explicit positive strides. A layout
// whose memory walks N,C,H,W or N,H,W,C is native; any other permutation is expressible as strides
// (CHWN:F is NWHC memory: n = C·H·W, c = 1, h = C, w = C·H); a flip is not (cuDNN strides are
// positive), so a flipped activation is converted to NCHW on the device. `convert` (the fallback
// when cuDNN offers no algorithm for the layouts as given) converts everything but NCHW itself.
ActPlan plan_activation(const Spec& s, const Shape& shape, bool convert) {
  const auto pl = layout::placement(s, "NCHW", shape);
  const std::vector<int> nchw{0, 1, 2, 3}, nhwc{0, 2, 3, 1};
  if (s.flip.empty() && pl.memory_axes == nchw) return {s, "native", "NCHW", {}};
  if (!convert && s.flip.empty() && pl.memory_axes == nhwc) return {s, "native", "NHWC", {}};
  if (!convert && s.flip.empty()) return {s, "strided", "strided", pl.stride};
  return {layout::canonical_spec("NCHW"), "converted", "NCHW", {}};
}

// cuDNN filters have no strides: KCRS (NCHW format, memory O,I,H,W) or KRSC (NHWC format, memory
// O,H,W,I). A flip stays in the data either way: in CUDNN_CONVOLUTION mode it is what makes the
// result PyTorch's cross-correlation, so a conversion reorders memory but keeps the flip.
struct FilterPlan {
  Spec stack;
  std::string path;  // native | converted
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
};

FilterPlan plan_filter(const Spec& s, const Shape& shape, bool convert) {
  const auto pl = layout::placement(s, "OIHW", shape);
  if (pl.memory_axes == std::vector<int>{0, 1, 2, 3}) return {s, "native", CUDNN_TENSOR_NCHW};
  if (!convert && pl.memory_axes == std::vector<int>{0, 2, 3, 1})
    return {s, "native", CUDNN_TENSOR_NHWC};
  return {Spec{"OIHW", false, s.flip}, "converted", CUDNN_TENSOR_NCHW};
}

// The layout of the bytes cuDNN writes for dW: the filter descriptor's memory order, with the
// flip of the buffer it was given (dL/dF for F = W flipped is dL/dW flipped: docs/layouts.md).
Spec cudnn_grad_weight_spec(const FilterPlan& f, const Spec& weight) {
  return Spec{f.format == CUDNN_TENSOR_NHWC ? "OHWI" : "OIHW", false, weight.flip};
}

// algo_select.hpp mirrors cudnnMathType_t so that it needs no cuDNN header.
static_assert(static_cast<int>(MathType::default_math) == CUDNN_DEFAULT_MATH);
static_assert(static_cast<int>(MathType::tensor_op) == CUDNN_TENSOR_OP_MATH);
static_assert(static_cast<int>(MathType::tensor_op_allow_conversion) ==
              CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
static_assert(static_cast<int>(MathType::fma) == CUDNN_FMA_MATH);
static_assert(CUDNN_STATUS_NOT_SUPPORTED == 3000 && CUDNN_STATUS_BAD_PARAM == 2000);

// Why an execution failed, for the algorithm selection: which direction's call, and whether cuDNN
// said "not supported" (try the next candidate) rather than failed.
struct Failure {
  bool set = false;
  Direction direction = Direction::fwd;
  bool not_supported = false;
};

bool fits_int(std::int64_t v) { return v >= 0 && v <= INT_MAX; }

class ConvCase {
 public:
  ConvCase(Context& ctx, const OpTask& task) : ctx_(ctx), task_(task), p_(task.c->params<cases::ConvParams>()) {}

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

 private:
  Status build(bool convert, nlohmann::json& info);
  Status query(Direction d);
  Status set_activation(TensorDesc& d, const ActPlan& p, const Shape& s);
  Status allocate_and_upload();
  Status probe_bias(nlohmann::json& info);
  bool nothing_to_convert() const;
  cudnnMathType_t requested_math() const;
  // Runs one cuDNN call of `combo`'s direction d; records the failure for the selection.
  Status direction_call(Direction d, cudnnStatus_t st, const char* call);
  ActivationGeometry geometry(const ActPlan& p) const;

  Context& ctx_;
  const OpTask& task_;
  const cases::ConvParams& p_;
  DType dt_ = DType::float32;
  Shape xs_, ws_, ys_, bs_;
  Spec in_spec_, w_spec_, out_spec_, gi_spec_, gw_spec_;
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
};

Status ConvCase::direction_call(Direction d, cudnnStatus_t st, const char* call) {
  if (st == CUDNN_STATUS_SUCCESS) return Status::ok();
  failure_ = {true, d, cudnn_status_is_not_supported(static_cast<int>(st))};
  Status err = gpu::check(st, call);
  // A refused launch may leave a (non-sticky) CUDA error behind; the next candidate must not
  // inherit it (PyTorch clears it the same way before trying the next algorithm).
  (void)cudaGetLastError();
  return err;
}

ActivationGeometry ConvCase::geometry(const ActPlan& p) const {
  const auto pl = layout::placement(p.stack, "NCHW", ys_);
  ActivationGeometry g{};
  for (int i = 0; i < 4; ++i) {
    g.size[i] = ys_[static_cast<std::size_t>(i)];
    g.stride[i] = pl.stride[static_cast<std::size_t>(i)];
  }
  return g;
}

bool ConvCase::nothing_to_convert() const {
  return xp_.format == "NCHW" && yp_.format == "NCHW" && dxp_.format == "NCHW" &&
         wp_.format == CUDNN_TENSOR_NCHW;
}

cudnnMathType_t ConvCase::requested_math() const {
  // 16-bit inputs: tensor cores, as PyTorch's cuDNN path uses (CUDNN_TENSOR_OP_MATH). Their
  // products are exact in float32 and accumulation is float32, so --math only concerns float32.
  if (dt_ != DType::float32) return CUDNN_TENSOR_OP_MATH;
  switch (ctx_.parsed.math) {
    case Math::fma:
      return CUDNN_FMA_MATH;  // FMA kernels only: IEEE float32, no TF32
    // TENSOR_OP_MATH, not ..._ALLOW_CONVERSION: the latter may down-convert float32 to float16.
    case Math::tf32:
      return CUDNN_TENSOR_OP_MATH;
    case Math::library_default:
      return CUDNN_DEFAULT_MATH;  // permits TF32 on Ampere and later
  }
  return CUDNN_FMA_MATH;
}

Status ConvCase::set_activation(TensorDesc& d, const ActPlan& p, const Shape& s) {
  VALIDATE_GPU_TRY(cudnnCreateTensorDescriptor(d.out()));
  const int n = static_cast<int>(s[0]), c = static_cast<int>(s[1]), h = static_cast<int>(s[2]),
            w = static_cast<int>(s[3]);
  const cudnnDataType_t t = cudnn_type(dt_);
  if (p.format == "NCHW") {
    VALIDATE_GPU_TRY(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, t, n, c, h, w));
  } else if (p.format == "NHWC") {
    VALIDATE_GPU_TRY(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NHWC, t, n, c, h, w));
  } else {
    VALIDATE_GPU_TRY(cudnnSetTensor4dDescriptorEx(
        d, t, n, c, h, w, static_cast<int>(p.strides[0]), static_cast<int>(p.strides[1]),
        static_cast<int>(p.strides[2]), static_cast<int>(p.strides[3])));
  }
  return Status::ok();
}

Status ConvCase::build(bool convert, nlohmann::json& info) {
  xp_ = plan_activation(in_spec_, xs_, convert);
  yp_ = plan_activation(out_spec_, ys_, convert);
  dxp_ = plan_activation(gi_spec_, xs_, convert);
  wp_ = plan_filter(w_spec_, ws_, convert);
  VALIDATE_TRY(set_activation(xd_, xp_, xs_));
  VALIDATE_TRY(set_activation(yd_, yp_, ys_));
  VALIDATE_TRY(set_activation(dxd_, dxp_, xs_));
  VALIDATE_GPU_TRY(cudnnCreateFilterDescriptor(wd_.out()));
  VALIDATE_GPU_TRY(cudnnSetFilter4dDescriptor(wd_, cudnn_type(dt_), wp_.format,
                                              static_cast<int>(ws_[0]), static_cast<int>(ws_[1]),
                                              static_cast<int>(ws_[2]), static_cast<int>(ws_[3])));
  VALIDATE_GPU_TRY(cudnnCreateTensorDescriptor(bd_.out()));
  VALIDATE_GPU_TRY(cudnnSetTensor4dDescriptor(bd_, CUDNN_TENSOR_NCHW, cudnn_type(dt_), 1,
                                              static_cast<int>(p_.o), 1, 1));
  VALIDATE_GPU_TRY(cudnnCreateConvolutionDescriptor(conv_.out()));
  // Compute type float for every data type: float32 accumulation for bfloat16/float16 too.
  VALIDATE_GPU_TRY(cudnnSetConvolution2dDescriptor(
      conv_, static_cast<int>(p_.padding[0]), static_cast<int>(p_.padding[1]),
      static_cast<int>(p_.stride[0]), static_cast<int>(p_.stride[1]),
      static_cast<int>(p_.dilation[0]), static_cast<int>(p_.dilation[1]),
      ctx_.parsed.convolution_mode ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION,
      CUDNN_DATA_FLOAT));
  VALIDATE_GPU_TRY(cudnnSetConvolutionGroupCount(conv_, static_cast<int>(p_.groups)));
  VALIDATE_GPU_TRY(cudnnSetConvolutionMathType(conv_, requested_math()));
  int on = 0, oc = 0, oh = 0, ow = 0;
  VALIDATE_GPU_TRY(cudnnGetConvolution2dForwardOutputDim(conv_, xd_, wd_, &on, &oc, &oh, &ow));
  if (Shape{on, oc, oh, ow} != ys_)
    return Error{fmt::format("cuDNN computes output shape [{}, {}, {}, {}], the case says {}", on,
                             oc, oh, ow, shape_to_string(ys_))};
  auto tensor_info = [](const Spec& spec, const ActPlan& p) {
    nlohmann::json j{
        {"spec", layout::to_string(spec)}, {"path", p.path}, {"cudnn_format", p.format}};
    if (p.path == "strided") j["strides_nchw"] = p.strides;
    if (p.path == "converted") j["converted_to"] = layout::to_string(p.stack);
    return j;
  };
  info["descriptors"] = {
      {"input", tensor_info(in_spec_, xp_)},
      {"output", tensor_info(out_spec_, yp_)},
      {"grad_output", tensor_info(out_spec_, yp_)},
      {"grad_input", tensor_info(gi_spec_, dxp_)},
      {"weight",
       {{"spec", layout::to_string(w_spec_)},
        {"path", wp_.path},
        {"cudnn_filter_format", wp_.format == CUDNN_TENSOR_NHWC ? "NHWC (KRSC)" : "NCHW (KCRS)"},
        {"buffer_layout", layout::to_string(wp_.stack)}}},
      {"grad_weight",
       {{"spec", layout::to_string(gw_spec_)},
        {"cudnn_writes", layout::to_string(cudnn_grad_weight_spec(wp_, w_spec_))}}},
  };
  for (Direction d : kDirections) VALIDATE_TRY(query(d));
  return Status::ok();
}

Status ConvCase::query(Direction d) {
  const int i = static_cast<int>(d);
  auto& cands = table_.cand[i];
  auto& rejected = table_.rejected[i];
  cands.clear();
  rejected.clear();
  const int count = algo_count(d);
  struct Perf {
    int algo;
    cudnnStatus_t status;
    std::size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
  };
  std::vector<Perf> perf;
  int returned = 0;
  // cuDNN's heuristics (no benchmarking), every algorithm with its status, best first.
  if (d == Direction::fwd) {
    std::vector<cudnnConvolutionFwdAlgoPerf_t> r(static_cast<std::size_t>(count));
    VALIDATE_GPU_TRY(cudnnGetConvolutionForwardAlgorithm_v7(ctx_.cudnn, xd_, wd_, conv_, yd_, count,
                                                            &returned, r.data()));
    for (int k = 0; k < returned; ++k)
      perf.push_back({r[k].algo, r[k].status, r[k].memory, r[k].determinism, r[k].mathType});
  } else if (d == Direction::bwd_data) {
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> r(static_cast<std::size_t>(count));
    VALIDATE_GPU_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx_.cudnn, wd_, yd_, conv_, dxd_,
                                                                 count, &returned, r.data()));
    for (int k = 0; k < returned; ++k)
      perf.push_back({r[k].algo, r[k].status, r[k].memory, r[k].determinism, r[k].mathType});
  } else {
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> r(static_cast<std::size_t>(count));
    VALIDATE_GPU_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx_.cudnn, xd_, yd_, conv_, wd_,
                                                                   count, &returned, r.data()));
    for (int k = 0; k < returned; ++k)
      perf.push_back({r[k].algo, r[k].status, r[k].memory, r[k].determinism, r[k].mathType});
  }
  std::vector<std::string> why;
  for (const auto& pf : perf) {
    if (pf.status != CUDNN_STATUS_SUCCESS) continue;
    if (std::any_of(cands.begin(), cands.end(), [&](const Choice& c) { return c.algo == pf.algo; }))
      continue;
    // The workspace is asked of cuDNN for the exact descriptors, never guessed from `memory`.
    std::size_t ws = 0;
    cudnnStatus_t st;
    if (d == Direction::fwd)
      st = cudnnGetConvolutionForwardWorkspaceSize(
          ctx_.cudnn, xd_, wd_, conv_, yd_, static_cast<cudnnConvolutionFwdAlgo_t>(pf.algo), &ws);
    else if (d == Direction::bwd_data)
      st = cudnnGetConvolutionBackwardDataWorkspaceSize(
          ctx_.cudnn, wd_, yd_, conv_, dxd_, static_cast<cudnnConvolutionBwdDataAlgo_t>(pf.algo),
          &ws);
    else
      st = cudnnGetConvolutionBackwardFilterWorkspaceSize(
          ctx_.cudnn, xd_, yd_, conv_, wd_, static_cast<cudnnConvolutionBwdFilterAlgo_t>(pf.algo),
          &ws);
    if (st != CUDNN_STATUS_SUCCESS) {
      why.push_back(algo_name(d, pf.algo) + ": workspace query " + cudnnGetErrorString(st));
      continue;
    }
    if (ws > ctx_.options.max_workspace_bytes) {
      why.push_back(fmt::format("{}: needs {} MiB of workspace (limit {} MiB)",
                                algo_name(d, pf.algo), ws >> 20,
                                ctx_.options.max_workspace_bytes >> 20));
      continue;
    }
    Choice c;
    c.algo = pf.algo;
    c.workspace = ws;
    c.deterministic = pf.determinism == CUDNN_DETERMINISTIC;
    c.heuristic_math = static_cast<MathType>(pf.math);
    c.math = applied_math(static_cast<MathType>(requested_math()), c.heuristic_math,
                          dt_ == DType::float32);
    c.selected_by = "heuristic";
    cands.push_back(std::move(c));
  }
  for (const auto& w : why) rejected += (rejected.empty() ? "" : "; ") + w;
  return Status::ok();
}

Status ConvCase::setup(nlohmann::json& info) {
  const auto& c = *task_.c;
  dt_ = c.dtype;
  xs_ = {p_.n, p_.c, p_.h, p_.w};
  ws_ = {p_.o, p_.c / p_.groups, p_.kh, p_.kw};
  ys_ = {p_.n, p_.o, p_.hout(), p_.wout()};
  bs_ = {p_.o};
  for (const Shape* s : {&xs_, &ws_, &ys_})
    if (!fits_int(shape_numel(*s)))
      return Error{"tensor of shape " + shape_to_string(*s) +
                   " is too large for cuDNN's 4-D descriptors (int sizes)"};
  auto spec = [&](const char* name) -> const Spec& { return *ctx_.layouts.find("conv2d", name); };
  in_spec_ = spec("input"), w_spec_ = spec("weight"), out_spec_ = spec("output");
  gi_spec_ = spec("grad_input"), gw_spec_ = spec("grad_weight");

  // Does cuDNN offer an algorithm for every direction (the named one where one is named)?
  auto feasible = [&](std::string* why) {
    for (Direction d : kDirections) {
      const auto& req = ctx_.parsed.algo[static_cast<int>(d)];
      const auto& cands = table_.cand[static_cast<int>(d)];
      const auto& rejected = table_.rejected[static_cast<int>(d)];
      if (cands.empty()) {
        *why = fmt::format("no {} algorithm{}", direction_name(d),
                           rejected.empty() ? "" : " (" + rejected + ")");
        return false;
      }
      if (req.kind == AlgoRequest::named &&
          std::none_of(cands.begin(), cands.end(),
                       [&](const Choice& ch) { return ch.algo == req.algo; })) {
        *why =
            fmt::format("{} algorithm {} not offered", direction_name(d), algo_name(d, req.algo));
        return false;
      }
    }
    return true;
  };
  // A descriptor or heuristics query that fails for the layouts as given takes the NCHW fallback
  // too: cuDNN refusing a stride pattern is an answer about the layout, not a runner error.
  auto fallback = choose_layouts([&](bool convert) { return build(convert, info); }, feasible,
                                 [&] { return nothing_to_convert(); });
  if (!fallback) return fallback.status();
  if (!fallback->empty()) {
    fell_back_ = true;
    info["fallback"] = *fallback;
  }
  VALIDATE_TRY(allocate_and_upload());
  VALIDATE_TRY(probe_bias(info));

  info["data_type"] = cudnn_type_name(cudnn_type(dt_));
  info["compute_type"] = "CUDNN_DATA_FLOAT";
  info["math_type"] = math_type_name(requested_math());
  info["conv_mode"] =
      ctx_.parsed.convolution_mode ? "CUDNN_CONVOLUTION" : "CUDNN_CROSS_CORRELATION";
  // The two classic mismatches, said out loud; compare will show the numbers.
  const bool flipped = w_spec_.flip == "HW";
  if (ctx_.parsed.convolution_mode && !flipped)
    info["warning"] = "conv mode reads the filter rotated by 180 degrees, and weight layout " +
                      layout::to_string(w_spec_) +
                      " is not flipped: the result is a true convolution with the canonical "
                      "kernel, not PyTorch's "
                      "cross-correlation";
  if (!ctx_.parsed.convolution_mode && flipped)
    info["warning"] =
        "xcorr mode with the flipped weight layout " + layout::to_string(w_spec_) +
        ": cuDNN cross-correlates with the rotated kernel (use --conv-mode conv for this layout)";
  return Status::ok();
}

Status ConvCase::allocate_and_upload() {
  // Inputs, narrowed to the device dtype and laid out for cuDNN. The target is laid out like the
  // output: the loss kernel walks both in the same memory order.
  auto in = [&](const char* name) { return task_.inputs.at(name); };
  auto x = upload(*in("input"), dt_, xp_.stack, "NCHW", "input");
  if (!x) return x.status();
  x_ = std::move(*x);
  auto w = upload(*in("weight"), dt_, wp_.stack, "OIHW", "weight");
  if (!w) return w.status();
  w_buf_ = std::move(*w);
  auto t = upload(*in("target"), DType::float32, yp_.stack, "NCHW", "target");
  if (!t) return t.status();
  t_buf_ = std::move(*t);
  if (p_.bias) {
    auto b = upload(*in("bias"), dt_, layout::canonical_spec("O"), "O", "bias");
    if (!b) return b.status();
    b_ = std::move(*b);
  }
  auto alloc = [&](DeviceTensor& dst, const Spec& s, const char* axes, const Shape& shape,
                   const char* name) -> Status {
    auto r = allocate(dt_, s, axes, shape, name);
    if (!r) return r.status();
    dst = std::move(*r);
    return Status::ok();
  };
  VALIDATE_TRY(alloc(y_, yp_.stack, "NCHW", ys_, "output"));
  VALIDATE_TRY(alloc(dy_, yp_.stack, "NCHW", ys_, "grad_output"));
  VALIDATE_TRY(alloc(dx_, dxp_.stack, "NCHW", xs_, "grad_input"));
  VALIDATE_TRY(alloc(dw_, cudnn_grad_weight_spec(wp_, w_spec_), "OIHW", ws_, "grad_weight"));
  if (p_.bias) VALIDATE_TRY(alloc(db_, layout::canonical_spec("O"), "O", bs_, "grad_bias"));
  auto l = gpu::DeviceBuffer::allocate(sizeof(float), "loss");
  if (!l) return l.status();
  loss_ = std::move(*l);
  auto s = gpu::DeviceBuffer::allocate(
      static_cast<std::size_t>(loss_scratch_floats(shape_numel(ys_))) * sizeof(float),
      "loss partial sums");
  if (!s) return s.status();
  scratch_ = std::move(*s);
  return Status::ok();
}

// cudnnAddTensor and cudnnConvolutionBackwardBias are legacy calls that may refuse a strided
// output (the fortran preset's CHWN:F) or bfloat16. Each is tried once on the case's own
// descriptors and buffers (y and db are overwritten by every execution anyway, so the probe's
// values do not matter); one that refuses is replaced by the runner's own kernel for this case,
// and info["bias_add"] / info["bias_grad"] say which ran and why.
Status ConvCase::probe_bias(nlohmann::json& info) {
  own_bias_add_ = own_bias_grad_ = false;
  if (!p_.bias) return Status::ok();
  if (ctx_.options.bias == "own") {
    own_bias_add_ = own_bias_grad_ = true;
    info["bias_add"] = info["bias_grad"] = "own kernel (requested)";
    return Status::ok();
  }
  const float one = 1.f, zero = 0.f;
  VALIDATE_GPU_TRY(cudaMemset(y_.buf.data(), 0, y_.buf.size()));
  VALIDATE_GPU_TRY(cudaMemset(dy_.buf.data(), 0, dy_.buf.size()));
  auto probe = [&](cudnnStatus_t st, const char* call, bool& own, const char* key) -> Status {
    if (st == CUDNN_STATUS_SUCCESS) {
      info[key] = call;
      return Status::ok();
    }
    const Status err = gpu::check(st, call);
    (void)cudaGetLastError();
    if (!cudnn_status_rejects_call(static_cast<int>(st))) return err;
    own = true;
    info[key] = "own kernel (" + err.message() + ")";
    return Status::ok();
  };
  VALIDATE_TRY(probe(cudnnAddTensor(ctx_.cudnn, &one, bd_, b_.buf.data(), &one, yd_, y_.buf.data()),
                     "cudnnAddTensor", own_bias_add_, "bias_add"));
  VALIDATE_TRY(probe(cudnnConvolutionBackwardBias(ctx_.cudnn, &one, yd_, dy_.buf.data(), &zero, bd_,
                                                  db_.buf.data()),
                     "cudnnConvolutionBackwardBias", own_bias_grad_, "bias_grad"));
  VALIDATE_GPU_TRY(cudaDeviceSynchronize());
  return Status::ok();
}

Result<bool> ConvCase::fall_back(const std::string& why, nlohmann::json& info) {
  if (fell_back_ || nothing_to_convert()) return false;
  VALIDATE_TRY(build(true, info));
  fell_back_ = true;
  info["fallback"] =
      "cuDNN's heuristics listed algorithms for the layouts as given but none "
      "executed (" +
      why + "); every tensor not already NCHW/OIHW is converted to it on the device";
  VALIDATE_TRY(allocate_and_upload());
  VALIDATE_TRY(probe_bias(info));
  return true;
}

Result<std::map<std::string, Tensor>> ConvCase::execute(const Combo& combo,
                                                        nlohmann::json* timing) {
  failure_ = Failure{};
  std::size_t ws_bytes = 0;
  Direction largest = Direction::fwd;
  for (Direction d : kDirections)
    if (combo.c[static_cast<int>(d)].workspace > ws_bytes) {
      ws_bytes = combo.c[static_cast<int>(d)].workspace;
      largest = d;
    }
  auto ws = gpu::DeviceBuffer::allocate(ws_bytes, "cuDNN workspace");
  if (!ws) {
    // As PyTorch does, a workspace that cannot be had rules the algorithm out rather than the case
    // (DeviceBuffer::allocate has cleared CUDA's last error, so the next try starts clean).
    failure_ = {true, largest, true};
    return ws.status();
  }
  const float one = 1.f,
              zero = 0.f;  // float scaling factors: every data type here computes in float
  const ActivationGeometry yg = geometry(yp_);
  Timer timer;
  auto timed = [&](const char* what, auto&& body) -> Status {
    if (timing) VALIDATE_TRY(timer.start());
    VALIDATE_TRY(body());
    if (timing) {
      auto ms = timer.stop();
      if (!ms) return ms.status();
      (*timing)[what] = *ms;
    }
    return Status::ok();
  };
  // Each direction runs with its candidate's own math type (applied_math): the descriptor is
  // shared, so it is set before every call.
  auto math = [&](Direction d) -> Status {
    VALIDATE_GPU_TRY(cudnnSetConvolutionMathType(
        conv_, static_cast<cudnnMathType_t>(combo.c[static_cast<int>(d)].math)));
    return Status::ok();
  };
  VALIDATE_TRY(timed("fwd_ms", [&]() -> Status {
    VALIDATE_TRY(math(Direction::fwd));
    VALIDATE_TRY(direction_call(
        Direction::fwd,
        cudnnConvolutionForward(ctx_.cudnn, &one, xd_, x_.buf.data(), wd_, w_buf_.buf.data(), conv_,
                                static_cast<cudnnConvolutionFwdAlgo_t>(combo.c[0].algo), ws->data(),
                                ws_bytes, &zero, yd_, y_.buf.data()),
        "cudnnConvolutionForward(…)"));
    if (p_.bias) {
      if (own_bias_add_)
        VALIDATE_TRY(bias_add(y_.buf.data(), b_.buf.data(), dt_, yg, nullptr));
      else
        VALIDATE_GPU_TRY(
            cudnnAddTensor(ctx_.cudnn, &one, bd_, b_.buf.data(), &one, yd_, y_.buf.data()));
    }
    return Status::ok();
  }));
  VALIDATE_TRY(mse_loss_grad(y_.buf.data(), dt_, t_buf_.buf.as<float>(), y_.numel(), dy_.buf.data(),
                             loss_.as<float>(), scratch_.as<float>(), nullptr));
  VALIDATE_TRY(timed("bwd_data_ms", [&]() -> Status {
    VALIDATE_TRY(math(Direction::bwd_data));
    VALIDATE_TRY(direction_call(
        Direction::bwd_data,
        cudnnConvolutionBackwardData(ctx_.cudnn, &one, wd_, w_buf_.buf.data(), yd_, dy_.buf.data(),
                                     conv_,
                                     static_cast<cudnnConvolutionBwdDataAlgo_t>(combo.c[1].algo),
                                     ws->data(), ws_bytes, &zero, dxd_, dx_.buf.data()),
        "cudnnConvolutionBackwardData(…)"));
    return Status::ok();
  }));
  VALIDATE_TRY(timed("bwd_filter_ms", [&]() -> Status {
    VALIDATE_TRY(math(Direction::bwd_filter));
    // dW is written through the filter descriptor: its memory order and the buffer's flip.
    VALIDATE_TRY(
        direction_call(Direction::bwd_filter,
                       cudnnConvolutionBackwardFilter(
                           ctx_.cudnn, &one, xd_, x_.buf.data(), yd_, dy_.buf.data(), conv_,
                           static_cast<cudnnConvolutionBwdFilterAlgo_t>(combo.c[2].algo),
                           ws->data(), ws_bytes, &zero, wd_, dw_.buf.data()),
                       "cudnnConvolutionBackwardFilter(…)"));
    if (p_.bias) {
      if (own_bias_grad_)
        VALIDATE_TRY(bias_grad(dy_.buf.data(), db_.buf.data(), dt_, yg, nullptr));
      else
        VALIDATE_GPU_TRY(cudnnConvolutionBackwardBias(ctx_.cudnn, &one, yd_, dy_.buf.data(), &zero,
                                                      bd_, db_.buf.data()));
    }
    return Status::ok();
  }));

  const DType storage = storage_dtype(dt_);
  std::map<std::string, Tensor> out;
  auto y = download(y_, y_.spec, storage);
  if (!y) return with_context("output", y.message());
  out.emplace("output", std::move(*y));
  Tensor loss(DType::float32, Shape{});
  VALIDATE_TRY(loss_.download(loss.bytes(), sizeof(float)));
  out.emplace("loss", std::move(loss));
  auto dx = download(dx_, dx_.spec, storage);
  if (!dx) return with_context("grad_input", dx.message());
  out.emplace("grad_input", std::move(*dx));
  // What a program gets back is cuDNN's dW bytes put in its grad_weight memory order — a memory
  // reorder cannot undo a flip, so the flip is cuDNN's (the weight buffer's) — and then read as the
  // grad_weight layout says. When that layout says the right flip (fortran preset: WHIO:F+flip=HW
  // in conv mode), this is the canonical gradient; when it does not, compare shows the flip.
  auto reordered = allocate(dt_, Spec{gw_spec_.axes, gw_spec_.fortran, w_spec_.flip}, "OIHW", ws_,
                            "grad_weight (reordered)");
  if (!reordered) return reordered.status();
  VALIDATE_TRY(gpu::convert_layout(dw_.buf.data(), dw_.spec, reordered->buf.data(), reordered->spec,
                                   dtype_size(dt_), ws_, "OIHW"));
  auto dw = download(*reordered, gw_spec_, storage);
  if (!dw) return with_context("grad_weight", dw.message());
  out.emplace("grad_weight", std::move(*dw));
  if (p_.bias) {
    auto db = download(db_, db_.spec, storage);
    if (!db) return with_context("grad_bias", db.message());
    out.emplace("grad_bias", std::move(*db));
  }
  return out;
}

nlohmann::json choice_json(Direction d, const Choice& c) {
  return {{"algo", algo_name(d, c.algo)},
          {"selected_by", c.selected_by},
          {"workspace_bytes", c.workspace},
          {"deterministic", c.deterministic},
          {"math_type", math_type_name(c.math)},
          {"heuristic_math_type", math_type_name(c.heuristic_math)}};
}

}  // namespace

std::vector<OpResult> run_conv(Context& ctx, const OpTask& task) {
  nlohmann::json info{{"device", fmt::format("cuda:{}", ctx.device.index)}, {"backend", "cudnn"}};
  std::map<std::string, std::string> paths;  // known once the case is set up
  auto single = [&](RunOutcome o, const std::string& msg) {
    OpResult r;
    r.outcome = o;
    r.message = msg;
    r.info = info;
    r.notes.paths = paths;
    std::vector<OpResult> v;
    v.push_back(std::move(r));
    return v;
  };
  if (task.c->dtype == DType::float64)
    return single(RunOutcome::unsupported, "the cudnn runner runs float32, bfloat16 and float16");
  if (!ctx.layouts.has_op("conv2d"))
    return single(RunOutcome::skipped, "the layout set has no conv2d");

  ConvCase cc(ctx, task);
  if (Status st = cc.setup(info); !st) return single(RunOutcome::error, st.message());
  paths = cc.paths();

  // Every execution is a real run (with --repeat); the selection keeps the ones it reports.
  std::vector<OpResult> attempts;
  auto try_combo = [&](const Combo& combo) -> Attempt {
    OpResult r;
    r.info = info;
    r.notes.paths = cc.paths();
    for (Direction d : kDirections)
      r.info["algorithms"][direction_name(d)] = choice_json(d, combo.c[static_cast<int>(d)]);
    // --repeat: the same algorithms again; any bit that moves is cuDNN nondeterminism (ALGO_0 and
    // ALGO_3 accumulate with atomics).
    run_repeated(ctx, r, [&](nlohmann::json* timing) { return cc.execute(combo, timing); });
    Attempt a;
    if (r.outcome != RunOutcome::ok) {
      const Failure& f = cc.last_failure();
      a.kind = f.set && f.not_supported ? Attempt::unsupported : Attempt::error;
      a.direction = f.direction;
      a.message = r.message;
    }
    attempts.push_back(std::move(r));
    return a;
  };
  const AlgoRequest(&req)[3] = ctx.parsed.algo;
  Selection sel = select_algorithms(cc.table(), req, try_combo);
  const bool listed_but_refused =
      !sel.dropped[0].empty() || !sel.dropped[1].empty() || !sel.dropped[2].empty();
  if (sel.outcome == Attempt::unsupported && listed_but_refused) {
    // Listed but not executable for the layouts as given (e.g. a strided CHWN:F activation):
    // convert to NCHW and choose again, as setup does when nothing is listed at all.
    auto fell = cc.fall_back(sel.message, info);
    if (!fell) return single(RunOutcome::error, fell.message());
    paths = cc.paths();
    if (*fell) {
      attempts.clear();
      const std::string first = sel.message;
      sel = select_algorithms(cc.table(), req, try_combo);
      if (sel.outcome == Attempt::unsupported)
        sel.message += " (after the NCHW fallback; the layouts as given: " + first + ")";
    }
  }
  if (sel.outcome == Attempt::unsupported) {
    for (Direction d : kDirections)
      if (!sel.dropped[static_cast<int>(d)].empty())
        info["algorithms_not_supported_when_executed"][direction_name(d)] =
            sel.dropped[static_cast<int>(d)];
    return single(RunOutcome::unsupported, sel.message);
  }

  std::vector<OpResult> results;
  for (const Planned& p : sel.results) {
    OpResult r;
    if (p.attempt_index >= 0) {
      r = std::move(attempts[static_cast<std::size_t>(p.attempt_index)]);
    } else {
      r.info = info;
      r.notes.paths = paths;
      for (Direction d : kDirections)
        r.info["algorithms"][direction_name(d)] = choice_json(d, p.combo.c[static_cast<int>(d)]);
    }
    r.variant = p.variant;
    if (p.attempt.kind == Attempt::unsupported) {
      // Listed by the heuristics, refused when executed: a fact about cuDNN, not a failure.
      r.outcome = RunOutcome::unsupported;
      r.outputs.clear();
      r.message = fmt::format(
          "{} algorithm {}: {}", direction_name(p.attempt.direction),
          algo_name(p.attempt.direction, p.combo.c[static_cast<int>(p.attempt.direction)].algo),
          p.attempt.message);
    }
    for (Direction d : kDirections) {
      const int i = static_cast<int>(d);
      if (!cc.table().rejected[i].empty())
        r.info["algorithms_left_out"][direction_name(d)] = cc.table().rejected[i];
      if (!sel.dropped[i].empty())
        r.info["algorithms_not_supported_when_executed"][direction_name(d)] = sel.dropped[i];
    }
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace validate::runners::cudnn_detail
