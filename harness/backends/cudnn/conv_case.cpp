// conv2d buffers and execution: the upload, the bias probe, the fallback's rebuild, one forward
// + loss + backward pass and the read-back of its results (conv_case.hpp).
#include <fmt/format.h>

#include "conv_case.hpp"
#include "validate/gpu/permute.hpp"

namespace validate::runners::cudnn_detail {

using layout::Spec;

Status ConvCase::allocate_and_upload() {
  // Inputs, narrowed to the device dtype and laid out for cuDNN. The target is laid out like the
  // output: the loss kernel walks both in the same memory order.
  auto in = [&](const char* name) { return task_.inputs.at(name); };
  auto x = upload(*in("input"), dt_, xp_.stack, "NCHW", "input");
  if (!x) return x.status();
  x_ = std::move(*x);
  auto w = upload(*in("weight"), dt_, wp_.stack, g_.weight_axes, "weight");
  if (!w) return w.status();
  w_buf_ = std::move(*w);
  auto t = upload(*in("target"), DType::float32, yp_.stack, "NCHW", "target");
  if (!t) return t.status();
  t_buf_ = std::move(*t);
  if (g_.bias) {
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
  VALIDATE_TRY(alloc(dw_, cudnn_grad_weight_spec(wp_, w_spec_, g_.weight_axes),
                     g_.weight_axes.c_str(), ws_, "grad_weight"));
  if (g_.bias) VALIDATE_TRY(alloc(db_, layout::canonical_spec("O"), "O", bs_, "grad_bias"));
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
  if (!g_.bias) return Status::ok();
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

Status ConvCase::pass(const Combo& combo, nlohmann::json* timing) {
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
  // One cuDNN call per direction on its operands (operands(): conv2d's or the transposed op's).
  auto run = [&](Direction d) -> Status {
    const int i = static_cast<int>(d);
    const Operands o = operands(d);
    VALIDATE_TRY(math(d));
    void* a = o.buf[0]->buf.data();
    void* b = o.buf[1]->buf.data();
    switch (d) {
      case Direction::fwd:
        return direction_call(
            d,
            cudnnConvolutionForward(ctx_.cudnn, &one, *o.desc[0], a, wd_, w_buf_.buf.data(), conv_,
                                    static_cast<cudnnConvolutionFwdAlgo_t>(combo.c[i].algo),
                                    ws->data(), ws_bytes, &zero, *o.desc[1], b),
            "cudnnConvolutionForward(…)");
      case Direction::bwd_data:
        return direction_call(d,
                              cudnnConvolutionBackwardData(
                                  ctx_.cudnn, &one, wd_, w_buf_.buf.data(), *o.desc[0], a, conv_,
                                  static_cast<cudnnConvolutionBwdDataAlgo_t>(combo.c[i].algo),
                                  ws->data(), ws_bytes, &zero, *o.desc[1], b),
                              "cudnnConvolutionBackwardData(…)");
      case Direction::bwd_filter:
        // dW is written through the filter descriptor: its memory order and the buffer's flip.
        return direction_call(d,
                              cudnnConvolutionBackwardFilter(
                                  ctx_.cudnn, &one, *o.desc[0], a, *o.desc[1], b, conv_,
                                  static_cast<cudnnConvolutionBwdFilterAlgo_t>(combo.c[i].algo),
                                  ws->data(), ws_bytes, &zero, wd_, dw_.buf.data()),
                              "cudnnConvolutionBackwardFilter(…)");
    }
    return Status::ok();
  };
  const auto order = execution_order(g_.transposed);
  // The direction that writes the output, then the bias on it (timed with it, as the forward).
  VALIDATE_TRY(timed(fmt::format("{}_ms", direction_name(order[0])).c_str(), [&]() -> Status {
    VALIDATE_TRY(run(order[0]));
    if (g_.bias) {
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
  VALIDATE_TRY(timed(fmt::format("{}_ms", direction_name(order[1])).c_str(),
                     [&]() -> Status { return run(order[1]); }));
  VALIDATE_TRY(timed("bwd_filter_ms", [&]() -> Status {
    VALIDATE_TRY(run(Direction::bwd_filter));
    if (g_.bias) {
      if (own_bias_grad_)
        VALIDATE_TRY(bias_grad(dy_.buf.data(), db_.buf.data(), dt_, yg, nullptr));
      else
        VALIDATE_GPU_TRY(cudnnConvolutionBackwardBias(ctx_.cudnn, &one, yd_, dy_.buf.data(), &zero,
                                                      bd_, db_.buf.data()));
    }
    return Status::ok();
  }));

  return Status::ok();
}

Result<Tensor> ConvCase::grad_weight_as_declared() {
  // What a program gets back is cuDNN's dW bytes put in its grad_weight memory order — a memory
  // reorder cannot undo a flip, so the flip is cuDNN's (the weight buffer's) — and then read as the
  // grad_weight layout says. When that layout says the right flip (fortran preset: WHIO:F+flip=HW
  // in conv mode), this is the canonical gradient; when it does not, compare shows the flip.
  auto reordered = allocate(dt_, Spec{gw_spec_.axes, gw_spec_.fortran, w_spec_.flip},
                            g_.weight_axes, ws_, "grad_weight (reordered)");
  if (!reordered) return reordered.status();
  VALIDATE_TRY(gpu::convert_layout(dw_.buf.data(), dw_.spec, reordered->buf.data(), reordered->spec,
                                   dtype_size(dt_), ws_, g_.weight_axes));
  return download(*reordered, gw_spec_, storage_dtype(dt_));
}

Result<std::map<std::string, Tensor>> ConvCase::execute(const Combo& combo,
                                                        nlohmann::json* timing) {
  VALIDATE_TRY(pass(combo, timing));
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
  auto dw = grad_weight_as_declared();
  if (!dw) return with_context("grad_weight", dw.message());
  out.emplace("grad_weight", std::move(*dw));
  if (g_.bias) {
    auto db = download(db_, db_.spec, storage);
    if (!db) return with_context("grad_bias", db.message());
    out.emplace("grad_bias", std::move(*db));
  }
  return out;
}

}  // namespace validate::runners::cudnn_detail
