// matmul through cuBLASLt: Y = A·B, dA = dY·Bᵀ, dB = Aᵀ·dY, with each matrix in the layout under
// test. cuBLASLt is column-major; a row-major matrix is the column-major view of its transpose, so
// every layout is a (pointer, column-major?) pair and a row-major output is computed as
// Yᵀ = Bᵀ·Aᵀ. Nothing is copied to make a layout fit, except a flipped axis (cuBLAS has no
// negative leading dimensions), which is converted on the device and recorded.
#include <chrono>
#include <exception>
#include <optional>

#include <fmt/format.h>

#include "device_param.hpp"
#include "device_trajectory.hpp"
#include "gemm_plan.hpp"
#include "internal.hpp"
#include "validate/gpu/permute.hpp"

namespace validate::runners::cudnn_detail {

namespace {

using layout::Spec;

const char* compute_name(cublasComputeType_t c) {
  switch (c) {
    case CUBLAS_COMPUTE_32F:
      return "CUBLAS_COMPUTE_32F";
    case CUBLAS_COMPUTE_32F_PEDANTIC:
      return "CUBLAS_COMPUTE_32F_PEDANTIC";
    case CUBLAS_COMPUTE_32F_FAST_TF32:
      return "CUBLAS_COMPUTE_32F_FAST_TF32";
    default:
      return "?";
  }
}

cublasComputeType_t compute_type(const Context& ctx, DType dt) {
  // CUBLAS_COMPUTE_32F on float32 data never uses TF32 (that needs ..._FAST_TF32): IEEE products
  // and sums. 16-bit data accumulates in float32 in every mode.
  if (dt == DType::float32 && ctx.parsed.math == Math::tf32) return CUBLAS_COMPUTE_32F_FAST_TF32;
  return CUBLAS_COMPUTE_32F;
}

// out = x · z (gemm_plan.hpp maps the storage orders). Writes what it chose into `info` when given.
Status gemm(const Context& ctx, DType dt, Mat out, Mat x, Mat z, void* out_ptr,
            nlohmann::json* info) {
  const GemmPlan g = plan_gemm(out, x, z);
  const cublasOperation_t op_a = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cudaDataType_t type = cuda_type(dt);
  const cublasComputeType_t ct = compute_type(ctx, dt);
  const std::int64_t m = g.m, n = g.n, k = g.k;
  LtMatmulDesc desc;
  VALIDATE_GPU_TRY(cublasLtMatmulDescCreate(desc.out(), ct, CUDA_R_32F));
  VALIDATE_GPU_TRY(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
  VALIDATE_GPU_TRY(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
  // Layouts describe the stored matrices (before op).
  LtLayout la, lb, lc;
  VALIDATE_GPU_TRY(cublasLtMatrixLayoutCreate(la.out(), type, static_cast<std::uint64_t>(g.a_rows),
                                              static_cast<std::uint64_t>(g.a_cols), g.lda));
  VALIDATE_GPU_TRY(cublasLtMatrixLayoutCreate(lb.out(), type, static_cast<std::uint64_t>(g.b_rows),
                                              static_cast<std::uint64_t>(g.b_cols), g.ldb));
  VALIDATE_GPU_TRY(cublasLtMatrixLayoutCreate(lc.out(), type, static_cast<std::uint64_t>(m),
                                              static_cast<std::uint64_t>(n), g.ldc));
  LtPreference pref;
  VALIDATE_GPU_TRY(cublasLtMatmulPreferenceCreate(pref.out()));
  const std::uint64_t max_ws = std::uint64_t{256} << 20;
  VALIDATE_GPU_TRY(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws));
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  VALIDATE_GPU_TRY(
      cublasLtMatmulAlgoGetHeuristic(ctx.lt, desc, la, lb, lc, lc, pref, 1, &heur, &found));
  if (found == 0)
    return Error{
        fmt::format("cublasLtMatmulAlgoGetHeuristic found no algorithm for m={} n={} k={} ({}, {})",
                    m, n, k, compute_name(ct), dtype_name(dt))};
  auto ws = gpu::DeviceBuffer::allocate(heur.workspaceSize, "cuBLASLt workspace");
  if (!ws) return ws.status();
  const float alpha = 1.f, beta = 0.f;
  VALIDATE_GPU_TRY(cublasLtMatmul(ctx.lt, desc, &alpha, g.a, la, g.b, lb, &beta, out_ptr, lc,
                                  out_ptr, lc, &heur.algo, ws->data(), heur.workspaceSize,
                                  nullptr));
  if (info) {
    int id = -1, splitk = 1;
    std::uint32_t reduction = 0;
    std::size_t written = 0;
    (void)cublasLtMatmulAlgoConfigGetAttribute(&heur.algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id,
                                               &written);
    // An attribute that cannot be read is -1, which gemm_algorithm_family reads as "unknown".
    if (cublasLtMatmulAlgoConfigGetAttribute(&heur.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                             sizeof splitk, &written) != CUBLAS_STATUS_SUCCESS)
      splitk = -1;
    int scheme = -1;
    if (cublasLtMatmulAlgoConfigGetAttribute(&heur.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                             &reduction, sizeof reduction,
                                             &written) == CUBLAS_STATUS_SUCCESS)
      scheme = static_cast<int>(reduction);
    *info = {{"m", m},
             {"n", n},
             {"k", k},
             {"transa", op_a == CUBLAS_OP_N ? "N" : "T"},
             {"transb", op_b == CUBLAS_OP_N ? "N" : "T"},
             {"compute_type", compute_name(ct)},
             {"algo_id", id},
             {"splitk", splitk},
             {"reduction_scheme", scheme},
             {"algorithm", gemm_algorithm_family(splitk, scheme)},
             {"workspace_bytes", heur.workspaceSize}};
  }
  return Status::ok();
}

// One matmul case on the device: each matrix's plan (gemm_plan.hpp) and its buffer.
struct MatmulCase {
  DType dt = DType::float32;
  cases::MatmulParams mp;
  MatPlan a, b, y, ga, gb;
  DeviceTensor A, B, T, Y, dY, gA, gB;
  gpu::DeviceBuffer loss, scratch;  // the loss, and the loss kernel's partial sums
};

// How each matrix is fed to cuBLASLt (run_info's "matrices").
nlohmann::json matrices_info(const Context& ctx, const MatmulCase& m) {
  auto mat_info = [&](const char* name, const MatPlan& p) {
    const Spec& s = *ctx.layouts.find("matmul", name);
    nlohmann::json j{{"spec", layout::to_string(s)},
                     {"path", p.path},
                     {"order", p.col_major ? "column-major" : "row-major"}};
    if (p.path == "converted") j["converted_to"] = layout::to_string(p.stack);
    return nlohmann::json{{name, j}};
  };
  nlohmann::json matrices = nlohmann::json::object();
  for (auto j : {mat_info("A", m.a), mat_info("B", m.b), mat_info("output", m.y),
                 mat_info("grad_A", m.ga), mat_info("grad_B", m.gb)})
    matrices.update(j);
  return matrices;
}

// A, B and the target uploaded in their stack layouts; the output and the gradients allocated.
Status set_up_buffers(const OpTask& task, MatmulCase& m) {
  const auto& mp = m.mp;
  const Shape as{mp.m, mp.k}, bs{mp.k, mp.n}, ys{mp.m, mp.n};
  auto take = [](Result<DeviceTensor> t, DeviceTensor& into) -> Status {
    if (!t) return t.status();
    into = std::move(*t);
    return Status::ok();
  };
  VALIDATE_TRY(take(upload(*task.inputs.at("A"), m.dt, m.a.stack, "MK", "A"), m.A));
  VALIDATE_TRY(take(upload(*task.inputs.at("B"), m.dt, m.b.stack, "KN", "B"), m.B));
  // The target in the output's layout: the loss walks both in one memory order.
  VALIDATE_TRY(take(upload(*task.inputs.at("target"), DType::float32, m.y.stack, "MN", "target"), m.T));
  VALIDATE_TRY(take(allocate(m.dt, m.y.stack, "MN", ys, "output"), m.Y));
  VALIDATE_TRY(take(allocate(m.dt, m.y.stack, "MN", ys, "grad_output"), m.dY));
  VALIDATE_TRY(take(allocate(m.dt, m.ga.stack, "MK", as, "grad_A"), m.gA));
  VALIDATE_TRY(take(allocate(m.dt, m.gb.stack, "KN", bs, "grad_B"), m.gB));
  auto loss = gpu::DeviceBuffer::allocate(sizeof(float), "loss");
  if (!loss) return loss.status();
  m.loss = std::move(*loss);
  auto scratch = gpu::DeviceBuffer::allocate(
      static_cast<std::size_t>(loss_scratch_floats(mp.m * mp.n)) * sizeof(float), "loss partial sums");
  if (!scratch) return scratch.status();
  m.scratch = std::move(*scratch);
  return Status::ok();
}

// The device half of one step: forward, loss, dA, dB; nothing read back. With `timing`, each
// GEMM's time and what cuBLASLt chose for it.
Status matmul_pass(const Context& ctx, MatmulCase& m, nlohmann::json* timing) {
  const auto& mp = m.mp;
  const Mat ma{m.A.buf.data(), mp.m, mp.k, m.a.col_major}, mb{m.B.buf.data(), mp.k, mp.n, m.b.col_major};
  const Mat my{m.Y.buf.data(), mp.m, mp.n, m.y.col_major}, mdy{m.dY.buf.data(), mp.m, mp.n, m.y.col_major};
  nlohmann::json gemms;
  Timer timer;
  auto step = [&](const char* name, Mat out, Mat x, Mat z, void* ptr) -> Status {
    if (timing) VALIDATE_TRY(timer.start());
    nlohmann::json g;
    VALIDATE_TRY(gemm(ctx, m.dt, out, x, z, ptr, timing ? &g : nullptr));
    if (timing) {
      auto ms = timer.stop();
      if (!ms) return ms.status();
      (*timing)[std::string(name) + "_ms"] = *ms;
      gemms[name] = g;
    }
    return Status::ok();
  };
  VALIDATE_TRY(step("forward", my, ma, mb, m.Y.buf.data()));
  VALIDATE_TRY(mse_loss_grad(m.Y.buf.data(), m.dt, m.T.buf.as<float>(), mp.m * mp.n, m.dY.buf.data(),
                             m.loss.as<float>(), m.scratch.as<float>(), nullptr));
  VALIDATE_TRY(step("grad_A", Mat{m.gA.buf.data(), mp.m, mp.k, m.ga.col_major}, mdy, mb.t(), m.gA.buf.data()));
  VALIDATE_TRY(step("grad_B", Mat{m.gB.buf.data(), mp.k, mp.n, m.gb.col_major}, ma.t(), mdy, m.gB.buf.data()));
  if (timing) (*timing)["gemms"] = gemms;
  return Status::ok();
}

// One single step, read back: output, loss, grad_A, grad_B.
Result<std::map<std::string, Tensor>> matmul_execute(const Context& ctx, MatmulCase& m, nlohmann::json* timing) {
  VALIDATE_TRY(matmul_pass(ctx, m, timing));
  const DType storage = storage_dtype(m.dt);
  std::map<std::string, Tensor> out;
  auto yo = download(m.Y, m.Y.spec, storage);
  if (!yo) return with_context("output", yo.message());
  out.emplace("output", std::move(*yo));
  Tensor l(DType::float32, Shape{});
  VALIDATE_TRY(m.loss.download(l.bytes(), sizeof(float)));
  out.emplace("loss", std::move(l));
  auto da = download(m.gA, m.gA.spec, storage);
  if (!da) return with_context("grad_A", da.message());
  out.emplace("grad_A", std::move(*da));
  auto db = download(m.gB, m.gB.spec, storage);
  if (!db) return with_context("grad_B", db.message());
  out.emplace("grad_B", std::move(*db));
  return out;
}

// A training case: B (the parameter) is updated on the device in its own layout, from dB as
// cuBLASLt wrote it in grad_B's layout — the same buffer when the two layouts agree, else
// converted to B's layout first, as a program must before it subtracts one from the other. The
// trajectory's tensors go into `outputs`; what ran into `training_info`.
Status train_matmul(const Context& ctx, const OpTask& task, MatmulCase& m, const TrainPlan& tp,
                    std::map<std::string, Tensor>& outputs, nlohmann::json& training_info) {
  const train::TrainConfig& tc = tp.config;
  const DType dt = m.dt, storage = storage_dtype(dt);
  const Shape bs{m.mp.k, m.mp.n};
  auto update = device_update_name(tc, dt);
  if (!update) return update.status();
  const bool same = same_memory(m.B.spec, m.gB.spec, "KN", bs);
  DeviceTensor dB_as_B;
  if (!same) {
    auto d = allocate(dt, m.B.spec, "KN", bs, "grad_B in B's layout");
    if (!d) return d.status();
    dB_as_B = std::move(*d);
  }
  DeviceParam b_opt;  // SGD or Adam on B; its float32 master in mixed precision
  FunctionStepper st;
  st.load = [&](std::int64_t s) -> Status {
    if (s == 0) {  // the reference's own batch and initial B, whatever ran before
      VALIDATE_TRY(reupload(m.A, *task.inputs.at("A"), "A"));
      VALIDATE_TRY(reupload(m.T, *task.inputs.at("target"), "target"));
      return b_opt.start(m.B, *task.inputs.at("B"), "B");
    }
    if (!task.step_inputs) return Error{"no batches for steps >= 1 (OpTask::step_inputs is not set)"};
    std::map<std::string, Tensor> batch;
    try {
      batch = task.step_inputs(s);
    } catch (const std::exception& e) {
      return Error{std::string("drawing the batch: ") + e.what()};
    }
    for (const char* name : {"A", "target"})
      if (!batch.count(name)) return Error{fmt::format("the step's batch has no {}", name)};
    VALIDATE_TRY(reupload(m.A, batch.at("A"), "A"));
    return reupload(m.T, batch.at("target"), "target");
  };
  st.pass = [&]() -> Result<float> {
    VALIDATE_TRY(matmul_pass(ctx, m, nullptr));
    float v = 0;
    VALIDATE_TRY(m.loss.download(&v, sizeof v));
    return v;
  };
  st.read = [&]() -> Result<std::map<std::string, Tensor>> {
    std::map<std::string, Tensor> out;
    auto b = b_opt.read(m.B, storage);
    if (!b) return with_context("B", b.message());
    out.emplace("B", std::move(*b));
    auto db = download(m.gB, m.gB.spec, storage);  // as the single step reports grad_B
    if (!db) return with_context("grad_B", db.message());
    out.emplace("grad_B", std::move(*db));
    return out;
  };
  st.step = [&](bool) -> Status {
    if (same) return b_opt.step(m.B, m.gB, tc);
    VALIDATE_TRY(gpu::convert_layout(m.gB.buf.data(), m.gB.spec, dB_as_B.buf.data(), m.B.spec, dtype_size(dt), bs, "KN"));
    return b_opt.step(m.B, dB_as_B, tc);
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto out = run_device_trajectory(tp, st);
  if (!out) return out.status();
  for (auto& [name, t] : *out) outputs.insert_or_assign(name, std::move(t));
  training_info = {{"steps", tc.steps},
                   {"checkpoints", tp.checkpoints},
                   {"optimizer", train::optimizer_name(tc.optimizer)},
                   {"update", *update},
                   {"update_layout", layout::to_string(m.B.spec)},
                   {"grad_B", same ? "used as written (B's layout)" : "converted to B's layout before the update"},
                   {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}};
  return Status::ok();
}

// The gemm descriptions ride along in time_ms; lifts them to their own key, and records what ran
// per produced tensor in the format the conv2d records use (info["algorithms"]).
void lift_gemms(nlohmann::json& info) {
  if (!info.contains("time_ms") || !info["time_ms"].contains("gemms")) return;
  info["gemms"] = info["time_ms"]["gemms"];
  info["time_ms"].erase("gemms");
  for (const char* t : {"forward", "grad_A", "grad_B"})
    if (info["gemms"].contains(t))
      info["algorithms"][std::string(t) == "forward" ? "output" : t] = info["gemms"][t].value("algorithm", "direct");
}

}  // namespace

std::vector<OpResult> run_matmul(Context& ctx, const OpTask& task) {
  OpResult r;
  r.info = {{"device", fmt::format("cuda:{}", ctx.device.index)}, {"backend", "cublasLt"}};
  auto done = [&](RunOutcome o, const std::string& msg) {
    r.outcome = o;
    r.message = msg;
    std::vector<OpResult> v;
    v.push_back(std::move(r));
    return v;
  };
  MatmulCase m;
  m.dt = task.c->dtype;
  if (m.dt == DType::float64) return done(RunOutcome::unsupported, "the cudnn runner runs float32, bfloat16 and float16");
  if (!ctx.layouts.has_op("matmul")) return done(RunOutcome::skipped, "the layout set has no matmul");
  std::optional<TrainPlan> plan;  // a training case trains below, or says why not
  if (task.c->train) {
    auto tp = plan_training(*task.c, task.op);
    if (!tp) return done(RunOutcome::unsupported, "training: " + tp.message());
    plan = std::move(*tp);
  }
  m.mp = task.c->params<cases::MatmulParams>();
  auto spec = [&](const char* name) -> const Spec& { return *ctx.layouts.find("matmul", name); };
  m.a = plan_matrix(spec("A"), "MK");
  m.b = plan_matrix(spec("B"), "KN");
  m.y = plan_matrix(spec("output"), "MN");
  m.ga = plan_matrix(spec("grad_A"), "MK");
  m.gb = plan_matrix(spec("grad_B"), "KN");
  r.info["matrices"] = matrices_info(ctx, m);
  r.info["compute_type"] = compute_name(compute_type(ctx, m.dt));
  r.info["data_type"] = std::string(dtype_name(m.dt));
  if (Status st = set_up_buffers(task, m); !st) return done(RunOutcome::error, st.message());

  run_repeated(ctx, r, [&](nlohmann::json* timing) { return matmul_execute(ctx, m, timing); });
  lift_gemms(r.info);
  if (plan && r.outcome == RunOutcome::ok) {
    nlohmann::json training_info;
    if (Status st = train_matmul(ctx, task, m, *plan, r.outputs, training_info); !st) {
      r.outcome = RunOutcome::error;
      r.message = "training trajectory: " + st.message();
      r.outputs.clear();
    } else if (Status chk = check_training_outputs(*task.c, task.op, r.outputs); !chk) {
      r.outcome = RunOutcome::error;
      r.message = "training trajectory: " + chk.message();
      r.outputs.clear();
    } else {
      r.info["training"] = training_info;
    }
  }
  std::vector<OpResult> v;
  v.push_back(std::move(r));
  return v;
}

}  // namespace validate::runners::cudnn_detail
