// conv2d set-up: how each layout reaches cuDNN (plans), the descriptors, cuDNN's algorithm
// candidates per direction and the NCHW fallback (conv_case.hpp).
#include <algorithm>
#include <climits>

#include <fmt/format.h>

#include "conv_case.hpp"

namespace validate::runners::cudnn_detail {

using layout::Spec;

ActPlan plan_activation(const Spec& s, const Shape& shape, bool convert) {
  const auto pl = layout::placement(s, "NCHW", shape);
  const std::vector<int> nchw{0, 1, 2, 3}, nhwc{0, 2, 3, 1};
  if (s.flip.empty() && pl.memory_axes == nchw) return {s, "native", "NCHW", {}};
  if (!convert && s.flip.empty() && pl.memory_axes == nhwc) return {s, "native", "NHWC", {}};
  if (!convert && s.flip.empty()) return {s, "strided", "strided", pl.stride};
  return {layout::canonical_spec("NCHW"), "converted", "NCHW", {}};
}

FilterPlan plan_filter(const Spec& s, const Shape& shape, bool convert, const std::string& axes) {
  const auto pl = layout::placement(s, axes, shape);
  if (pl.memory_axes == std::vector<int>{0, 1, 2, 3}) return {s, "native", CUDNN_TENSOR_NCHW};
  if (!convert && pl.memory_axes == std::vector<int>{0, 2, 3, 1})
    return {s, "native", CUDNN_TENSOR_NHWC};
  return {Spec{axes, false, s.flip}, "converted", CUDNN_TENSOR_NCHW};
}

Spec cudnn_grad_weight_spec(const FilterPlan& f, const Spec& weight, const std::string& axes) {
  // KRSC: K, then R, S, then C (OHWI for OIHW, IHWO for IOHW).
  const std::string krsc{axes[0], axes[2], axes[3], axes[1]};
  return Spec{f.format == CUDNN_TENSOR_NHWC ? krsc : axes, false, weight.flip};
}

namespace {

// algo_select.hpp mirrors cudnnMathType_t so that it needs no cuDNN header.
static_assert(static_cast<int>(MathType::default_math) == CUDNN_DEFAULT_MATH);
static_assert(static_cast<int>(MathType::tensor_op) == CUDNN_TENSOR_OP_MATH);
static_assert(static_cast<int>(MathType::tensor_op_allow_conversion) ==
              CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
static_assert(static_cast<int>(MathType::fma) == CUDNN_FMA_MATH);
static_assert(CUDNN_STATUS_NOT_SUPPORTED == 3000 && CUDNN_STATUS_BAD_PARAM == 2000);

bool fits_int(std::int64_t v) { return v >= 0 && v <= INT_MAX; }

}  // namespace

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

ConvCase::Operands ConvCase::operands(Direction d) {
  Operands o{};
  const auto names = operand_tensors(d, g_.transposed);
  for (int k = 0; k < 2; ++k) {
    const std::string n = names[static_cast<std::size_t>(k)];
    o.desc[k] = n == "input" ? &xd_ : n == "grad_input" ? &dxd_ : &yd_;
    o.buf[k] = n == "input" ? &x_ : n == "grad_input" ? &dx_ : n == "output" ? &y_ : &dy_;
  }
  return o;
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
  wp_ = plan_filter(w_spec_, ws_, convert, g_.weight_axes);
  VALIDATE_TRY(set_activation(xd_, xp_, xs_));
  VALIDATE_TRY(set_activation(yd_, yp_, ys_));
  VALIDATE_TRY(set_activation(dxd_, dxp_, xs_));
  VALIDATE_GPU_TRY(cudnnCreateFilterDescriptor(wd_.out()));
  VALIDATE_GPU_TRY(cudnnSetFilter4dDescriptor(wd_, cudnn_type(dt_), wp_.format,
                                              static_cast<int>(ws_[0]), static_cast<int>(ws_[1]),
                                              static_cast<int>(ws_[2]), static_cast<int>(ws_[3])));
  VALIDATE_GPU_TRY(cudnnCreateTensorDescriptor(bd_.out()));
  VALIDATE_GPU_TRY(cudnnSetTensor4dDescriptor(bd_, CUDNN_TENSOR_NCHW, cudnn_type(dt_), 1,
                                              static_cast<int>(g_.channels_out), 1, 1));
  VALIDATE_GPU_TRY(cudnnCreateConvolutionDescriptor(conv_.out()));
  // Compute type float for every data type: float32 accumulation for bfloat16/float16 too.
  VALIDATE_GPU_TRY(cudnnSetConvolution2dDescriptor(
      conv_, static_cast<int>(g_.padding[0]), static_cast<int>(g_.padding[1]),
      static_cast<int>(g_.stride[0]), static_cast<int>(g_.stride[1]),
      static_cast<int>(g_.dilation[0]), static_cast<int>(g_.dilation[1]),
      convolution_mode_ ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  VALIDATE_GPU_TRY(cudnnSetConvolutionGroupCount(conv_, static_cast<int>(g_.groups)));
  VALIDATE_GPU_TRY(cudnnSetConvolutionMathType(conv_, requested_math()));
  // cuDNN's convolution X -> Y must be the case's: conv2d's output shape, or for the transposed
  // op its input shape (the output_padding rows are what the floor division drops).
  int on = 0, oc = 0, oh = 0, ow = 0;
  const Operands fwd = operands(Direction::fwd);
  VALIDATE_GPU_TRY(
      cudnnGetConvolution2dForwardOutputDim(conv_, *fwd.desc[0], wd_, &on, &oc, &oh, &ow));
  if (Shape{on, oc, oh, ow} != g_.cudnn_y())
    return Error{fmt::format("cuDNN's convolution computes [{}, {}, {}, {}], the case needs {}", on,
                             oc, oh, ow, shape_to_string(g_.cudnn_y()))};
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
        {"cudnn_writes", layout::to_string(cudnn_grad_weight_spec(wp_, w_spec_, g_.weight_axes))}}},
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
  const Operands ops = operands(d);
  const cudnnTensorDescriptor_t a = *ops.desc[0], b = *ops.desc[1];
  if (d == Direction::fwd) {
    std::vector<cudnnConvolutionFwdAlgoPerf_t> r(static_cast<std::size_t>(count));
    VALIDATE_GPU_TRY(cudnnGetConvolutionForwardAlgorithm_v7(ctx_.cudnn, a, wd_, conv_, b, count,
                                                            &returned, r.data()));
    for (int k = 0; k < returned; ++k)
      perf.push_back({r[k].algo, r[k].status, r[k].memory, r[k].determinism, r[k].mathType});
  } else if (d == Direction::bwd_data) {
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> r(static_cast<std::size_t>(count));
    VALIDATE_GPU_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx_.cudnn, wd_, a, conv_, b,
                                                                 count, &returned, r.data()));
    for (int k = 0; k < returned; ++k)
      perf.push_back({r[k].algo, r[k].status, r[k].memory, r[k].determinism, r[k].mathType});
  } else {
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> r(static_cast<std::size_t>(count));
    VALIDATE_GPU_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx_.cudnn, a, b, conv_, wd_,
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
          ctx_.cudnn, a, wd_, conv_, b, static_cast<cudnnConvolutionFwdAlgo_t>(pf.algo), &ws);
    else if (d == Direction::bwd_data)
      st = cudnnGetConvolutionBackwardDataWorkspaceSize(
          ctx_.cudnn, wd_, a, conv_, b, static_cast<cudnnConvolutionBwdDataAlgo_t>(pf.algo), &ws);
    else
      st = cudnnGetConvolutionBackwardFilterWorkspaceSize(
          ctx_.cudnn, a, b, conv_, wd_, static_cast<cudnnConvolutionBwdFilterAlgo_t>(pf.algo), &ws);
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
  xs_ = g_.x;
  ws_ = g_.w;
  ys_ = g_.y;
  bs_ = {g_.channels_out};
  for (const Shape* s : {&xs_, &ws_, &ys_})
    if (!fits_int(shape_numel(*s)))
      return Error{"tensor of shape " + shape_to_string(*s) +
                   " is too large for cuDNN's 4-D descriptors (int sizes)"};
  auto spec = [&](const char* name) -> const Spec& { return *ctx_.layouts.find(g_.op, name); };
  in_spec_ = spec("input"), w_spec_ = spec("weight"), out_spec_ = spec("output");
  gi_spec_ = spec("grad_input"), gw_spec_ = spec("grad_weight");
  // conv2d's mode is the run's (resolve_conv_mode matched it to the conv2d weight); the
  // transposed op's follows its own weight the same way.
  if (g_.transposed) {
    auto mode = convolution_mode_of(w_spec_);
    if (!mode) return Error{"conv_transpose2d " + mode.message()};
    convolution_mode_ = *mode;
  } else {
    convolution_mode_ = ctx_.parsed.convolution_mode;
  }

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
  info["conv_mode"] = convolution_mode_ ? "CUDNN_CONVOLUTION" : "CUDNN_CROSS_CORRELATION";
  if (g_.transposed)
    info["transposed_as"] =
        "output = cudnnConvolutionBackwardData, grad_input = cudnnConvolutionForward, "
        "grad_weight = cudnnConvolutionBackwardFilter(x = grad_output, dy = input)";
  // make_cudnn_runner matched the mode to this weight spec (resolve_conv_mode): the two classic
  // mismatches, conv mode with an unflipped kernel and xcorr with a flipped one, never get here.
  return Status::ok();
}

}  // namespace validate::runners::cudnn_detail
