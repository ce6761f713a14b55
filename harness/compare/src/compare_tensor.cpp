// One tensor of a run against its reference: shape, the run's manifest, metrics, gates, verdict.
#include "comparer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <type_traits>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "validate/metrics/bounds.hpp"
#include "validate/metrics/ulp.hpp"
#include "validate/core/fs.hpp"
#include "validate/ops/registry.hpp"

namespace validate::compare::detail {

namespace stdfs = std::filesystem;

namespace {

// Why no element of a tensor was held to a value by its gates, if so: no element test at all, or
// max_ulp alone with every element below the near-zero floor (where max_ulp does not look).
std::optional<std::string> unchecked_by_value(const TensorStats& s, const Gates& gt, bool bounded) {
  if (gt.atol || gt.rtol || (gt.bound && bounded)) return std::nullopt;
  if (gt.max_ulp && *gt.max_ulp < 4294967296.0) {  // 2^32 and more: any distance (ulp_limit)
    if (s.ulp.count > 0) return std::nullopt;
    return fmt::format("max_ulp is its only element test and all {} finite elements are below the near-zero floor "
                       "{:.3g} (near_zero {} of max|ref| {:.3g}), where max_ulp does not look",
                       s.compared, s.near_zero_floor, gt.near_zero, s.ref_max_abs);
  }
  return std::string("no element test is set (bound, atol, rtol off, max_ulp off or any distance): min_pcc alone, "
                     "which no scaling of the run moves");
}

std::string npy_descr(DType d) {
  return d == DType::float16 ? "<f2" : d == DType::float64 ? "<f8" : "<f4";
}
// min_pcc never asks for more correlation than the storage roundings of two correct stacks leave
// (pcc_rounding_floor, docs/compare.md): same-sign data with a large common offset and a spread
// near its rounding. Only a tensor whose pcc is below min_pcc pays the extra pass.
Gates pcc_gate(const Gates& gt, const TensorStats& s, const ArrayView& ref, DType logical) {
  if (!gt.min_pcc || s.numel < 2 || s.pcc >= *gt.min_pcc) return gt;
  Gates g = gt;
  g.min_pcc = std::min(*gt.min_pcc, pcc_rounding_floor(ref, logical));
  return g;
}

void fail(Entry& e, std::string msg) {
  e.verdict = Verdict::failed;
  e.message = std::move(msg);
}

// A reference whose metadata records a shape must hold that shape; one without (an op that leaves
// it to the data) takes the file's. A loss's empty shape is a record (0-d), not an absence.
std::optional<std::string> adopt_reference_shape(const PairItem& it, const Shape& ref_shape, Entry& e) {
  if (e.shape.empty() && e.role != ops::Role::loss) {
    e.shape = ref_shape;
    return std::nullopt;
  }
  if (ref_shape == e.shape) return std::nullopt;
  return fmt::format("reference: {} has shape {} but its metadata says {}", it.ref_file, shape_to_string(ref_shape),
                     shape_to_string(e.shape));
}

// A parameter checkpoint is the optimizer's float32 master copy in every dtype (docs/training.md,
// "Mixed precision"): rounding it to a bfloat16 case's dtype would hide an update below its ULP.
DType logical_dtype(const PairItem& it, const Entry& e) {
  return e.role && cases::Case::master_copy(*e.role, it.tensor) ? DType::float32 : it.ref->c.dtype;
}

std::string legacy_gate_note(bool checkpoint, bool adam) {
  if (checkpoint && adam)
    return "Adam trajectories' checkpoints are gated by the fixed rtol growing as sqrt(1 + k): "
           "no error bound is derived for Adam's update (docs/training.md, \"Checkpoint bounds\")";
  if (checkpoint)
    return "the reference set has no error-bound scales for its training checkpoints (made before "
           "validate stored them): they are gated by the fixed rtol growing as sqrt(1 + k) "
           "(docs/training.md, \"Checkpoint bounds\"); regenerate it for per-element bounds";
  return "the reference set has no error-bound scales (made before validate stored them): outputs and "
         "gradients are gated by the fixed rtol of docs/compare.md (\"Sets without scales\"); "
         "regenerate it for per-element error bounds";
}

// A tensor the policy leaves without any gate would pass whatever it holds (a policy gating only
// the loss passed a float32 output flipped along W): it fails, as an ungated loss curve does.
std::optional<std::string> missing_gate(const PairItem& it, const Entry& e, const Gates& gt, bool has_scale) {
  const bool scalar = e.role == ops::Role::loss || e.shape.empty();
  const bool loss_by_bound = e.role == ops::Role::loss && gt.bound;  // derived from the set, or legacy loss_abs
  if (scalar ? gt.loss_abs || gt.loss_rel || loss_by_bound
             : gt.atol || gt.rtol || gt.max_ulp || gt.min_pcc || (gt.bound && has_scale))
    return std::nullopt;
  const std::string sel = fmt::format("{}.{}", it.dtype, e.role ? std::string(ops::role_name(*e.role)) : it.tensor);
  return fmt::format(
      "the policy sets no gate for {} ({}: none of {}): an ungated tensor cannot pass (set e.g. --gate {}.{}=...)",
      it.tensor, sel, scalar ? "loss_abs, loss_rel, bound" : "bound, atol, rtol, max_ulp, min_pcc", sel,
      scalar ? "loss_abs" : "rtol");
}

MetricOptions metric_options(const PairItem& it, const Entry& e, const Gates& gt, DType logical, int threads) {
  MetricOptions mo;
  mo.logical = logical;
  mo.near_zero_fraction = gt.near_zero;
  mo.atol = gt.atol;
  mo.rtol = gt.rtol;
  if (gt.max_ulp) mo.max_ulp = ulp_limit(*gt.max_ulp);
  mo.threads = threads;
  if (const Json* m = find_path(
          it.ref->metadata, {"ops", e.op_name().c_str(), "tensors", it.tensor.c_str(), "max_abs"}))
    if (m->is_number()) mo.ref_max_abs = m->get<double>();
  return mo;
}

// What makes the reference unusable as a yardstick, seen on the metrics' pass over it.
std::optional<std::string> broken_reference(const PairItem& it, const TensorStats& s,
                                            const std::optional<double>& metadata_max_abs) {
  // The floor came from the metadata's max_abs: it must be the data's, or the verdict means
  // nothing (max_abs 1e30 passed a run off by 0.3 everywhere).
  if (metadata_max_abs && *metadata_max_abs != s.ref_max_abs_seen)
    return fmt::format("reference: {} has max |value| {} but its metadata records max_abs {}: the "
                       "metadata does not describe the data (run validate verify)",
                       it.ref_file, s.ref_max_abs_seen, *metadata_max_abs);
  if (s.nonfinite.nan_ref > 0)
    return fmt::format("reference: {} holds {} NaN value(s): a NaN reference is a broken reference, "
                       "and nothing can be checked against it",
                       it.ref_file, s.nonfinite.nan_ref);
  // Every element infinite on both sides alike (a reference of +inf everywhere): no value is left
  // to check, as with a NaN reference.
  if (s.numel > 0 && s.compared == 0 && s.nonfinite.mismatches() == 0)
    return fmt::format("reference: {} holds no finite value: an all-infinite reference is a broken "
                       "reference, and no element can be checked against it by value",
                       it.ref_file);
  return std::nullopt;
}

// One warning lists every such tensor, so a report with many of them stays one line long.
void warn_unchecked_by_value(const PairItem& it, const Entry& e, std::vector<std::string>& warnings) {
  const std::string head = "tensor(s) not checked by value (no element test reached any of their elements; marked "
                           "mistrusted): ";
  const std::string id = fmt::format("{}/{}/{}/{}", it.dtype, it.ref->c.name, e.op_name(), it.tensor);
  auto w = std::find_if(warnings.begin(), warnings.end(), [&](const std::string& x) { return x.rfind(head, 0) == 0; });
  if (w == warnings.end()) warnings.push_back(head + id);
  else *w += ", " + id;
}

}  // namespace

void Comparer::compare_tensor(const RunDirectory& run, const PairItem& it, Entry& e) {
  auto ref = open_npy(it.ref_file);
  if (!ref) return invalid(e, "reference: " + ref.message());
  if (auto bad = adopt_reference_shape(it, ref->header.shape, e)) return invalid(e, *bad);
  if (!fs::exists(it.run_file)) return fail(e, "declared in \"produced\" but missing: " + it.run_file);
  std::optional<RunHasher::Hashed> hashed = hasher_ ? hasher_->take(it.run_file) : std::nullopt;
  auto run_arr = hashed ? open_npy(std::move(hashed->file)) : open_npy(it.run_file);
  if (!run_arr) return invalid(e, "run: " + run_arr.message());
  if (!check_run_file(run, it, *ref, *run_arr, hashed ? &hashed->sha256 : nullptr, e)) return;
  const DType logical = logical_dtype(it, e);
  e.gates = opt_.policy.resolve(TensorKey{it.dtype, *it.op, e.role, it.tensor});
  if (e.role == ops::Role::loss_curve) return compare_loss_curve(it, *ref, *run_arr, logical, e);
  std::optional<ScaleFile> scale;
  if (!open_bound_scale(it, e, *ref, scale)) return;
  // A checkpoint's atol, rtol and max_ulp grow as sqrt(1 + k); its bound carries its steps itself.
  if (e.role == ops::Role::checkpoint) e.gates = checkpoint_gates(*e.gates, it.tensor);
  const Gates& gt = *e.gates;
  if (auto why = missing_gate(it, e, gt, scale.has_value())) return fail(e, *why);
  if (e.role == ops::Role::loss || e.shape.empty()) return compare_scalar(it, *ref, *run_arr, gt, e);
  const ScaleFile* bound_scale = scale && gt.bound ? &*scale : nullptr;
  if (run_arr->header.shape != e.shape) return fail_shape_mismatch(it, *ref, *run_arr, gt, bound_scale, e);
  // Its sequential pass runs beside the metrics' (joined before the maps close, on every return).
  std::optional<PendingBias> pending_bias = bound_scale ? start_bias(it, e, *ref, *run_arr, *bound_scale, gt) : std::nullopt;
  if (!compute_tensor_metrics(it, *ref, *run_arr, gt, logical, e)) return;
  const TensorStats& s = *e.stats;

  GateResult gr = check_tensor_gates(s, pcc_gate(gt, s, ref->view(), logical), e.shape, e.axes, ref->view(),
                                     run_arr->view());
  std::optional<Diagnosis> named_diagnosis;  // a check that names its mistake
  if (bound_scale) {
    if (auto dx = check_error_bound(it, e, *ref, *run_arr, *bound_scale, gt, gr, pending_bias ? &*pending_bias : nullptr))
      named_diagnosis = std::move(*dx);
    if (e.verdict == Verdict::invalid) return;
  }
  if (e.role == ops::Role::checkpoint) add_checkpoint_checks(it, gt, gr, named_diagnosis);
  e.checks = gr.checks;
  decide_verdict(it, *ref, *run_arr, gt, gr, std::move(named_diagnosis), bound_scale, scale.has_value(), e);
  compare_oracle(it, e, *ref, *run_arr, logical);
}

bool Comparer::check_run_file(const RunDirectory& run, const PairItem& it, const Mapped& ref, const Mapped& run_arr,
                              const std::string* digest, Entry& e) {
  // The run's own manifest vouches for every file: an edited or swapped run tensor is caught
  // here even when its numbers happen to pass.
  if (Status st = digest ? check_listed_digest(run, it.run_rel, *digest)
                         : check_listed_bytes(run, it.run_rel, run_arr.file.data(), run_arr.file.size());
      !st) {
    fail(e, st.message());
    return false;
  }
  // A run tensor is saved in its reference's storage dtype (docs/formats.md): a float32 output
  // saved as float16 carries float16 rounding (4.9e-4) that sits just under float32's rtol and
  // passed. Read as float32 it would be judged on data the stack never claimed to produce.
  if (run_arr.header.dtype != ref.header.dtype) {
    invalid(e, fmt::format("run: {} is stored as {} ({}) but its reference {} is stored as {} ({}): a "
                           "run tensor must have its reference's storage dtype",
                           it.run_file, dtype_name(run_arr.header.dtype), npy_descr(run_arr.header.dtype),
                           it.ref_file, dtype_name(ref.header.dtype), npy_descr(ref.header.dtype)));
    return false;
  }
  return true;
}

// Training trajectories (trajectory_check.hpp): the loss curve as a curve, not element by element.
void Comparer::compare_loss_curve(const PairItem& it, const Mapped& ref, const Mapped& run_arr, DType logical,
                                  Entry& e) {
  const std::int64_t steps = it.ref->c.train ? it.ref->c.train->steps : shape_numel(e.shape);
  if (auto bad = check_loss_curve(ref.view(), run_arr.view(), run_arr.header.shape, steps, *e.gates, e))
    return invalid(e, *bad + " (" + it.ref_file + ")");
  compare_oracle(it, e, ref, run_arr, logical);
}

// Per-element error bounds (bounds.hpp) for outputs, gradients and training checkpoints: the
// set's scale of this tensor. A set made before scales existed is gated by the old fixed rtol,
// with a note; so are an Adam trajectory's checkpoints, which have none.
bool Comparer::open_bound_scale(const PairItem& it, Entry& e, const Mapped& ref, std::optional<ScaleFile>& scale) {
  const bool checkpoint = e.role == ops::Role::checkpoint;
  const bool bounded_role = e.role == ops::Role::output || e.role == ops::Role::grad || checkpoint;
  if (!e.gates->bound || !bounded_role) return true;
  const std::vector<std::string> quantities =
      checkpoint ? std::vector<std::string>{cases::kCheckpointBoundQuantity}
      : e.role == ops::Role::grad ? std::vector<std::string>{cases::kGradientBoundQuantity, "rss_products"}
                                  : std::vector<std::string>{"rss_products"};
  auto sm = open_scale(it, e.op_name(), it.tensor, e.shape, quantities, &ref);
  if (!sm) {
    invalid(e, sm.message());
    return false;
  }
  if (*sm) {
    scale = std::move(*sm);
    return true;
  }
  if (!e.gates->atol && !e.gates->rtol) e.gates->rtol = legacy_rtol(it.dtype, e.role != ops::Role::output);
  e.gates->bound.reset();
  const bool adam = it.ref->c.train && it.ref->c.train->optimizer == train::Optimizer::adam;
  const std::string note = legacy_gate_note(checkpoint, adam);
  if (std::find(report_.warnings.begin(), report_.warnings.end(), note) == report_.warnings.end())
    report_.warnings.push_back(note);
  return true;
}

// A loss (or any 0-d tensor) accepts a run of any one-element shape.
void Comparer::compare_scalar(const PairItem& it, const Mapped& ref, const Mapped& run_arr, const Gates& gt,
                              Entry& e) {
  if (run_arr.header.shape != e.shape && shape_numel(run_arr.header.shape) != 1)
    return fail(e, fmt::format("shape mismatch: run loss has shape {}, expected a scalar",
                               shape_to_string(run_arr.header.shape)));
  compare_loss(it, ref, run_arr, gt, e);
}

// Same element count in another shape is often a layout mistake: the diagnosis may name it.
void Comparer::fail_shape_mismatch(const PairItem& it, const Mapped& ref, const Mapped& run_arr, const Gates& gt,
                                   const ScaleFile* bound_scale, Entry& e) {
  const Shape& rs = run_arr.header.shape;
  fail(e, fmt::format("shape mismatch: run {} is {}, reference {}", it.tensor, shape_to_string(rs),
                      shape_to_string(e.shape)));
  if (shape_numel(rs) == shape_numel(e.shape) && opt_.diagnose) {
    auto dx = run_diagnosis(it, e, ref, run_arr, gt, 0.0, bound_scale);
    if (!dx.summary.empty()) e.diagnosis = std::move(dx);
  }
}

bool Comparer::compute_tensor_metrics(const PairItem& it, const Mapped& ref, const Mapped& run_arr, const Gates& gt,
                                      DType logical, Entry& e) {
  const MetricOptions mo = metric_options(it, e, gt, logical, opt_.threads);
  auto st = compute_metrics(ref.view(), run_arr.view(), mo);
  if (!st) {
    invalid(e, it.run_file + ": " + st.message());
    return false;
  }
  e.stats = std::move(*st);
  if (auto bad = broken_reference(it, *e.stats, mo.ref_max_abs)) {
    invalid(e, *bad);
    return false;
  }
  e.worst_coords = format_coords(e.stats->worst_abs.index, e.shape, e.axes);
  return true;
}

// step1_<param>: the first update itself, against the reference's and against the run's own
// step 0; step<k>_<param> of a narrow case: a float32 master (trajectory_check.hpp).
void Comparer::add_checkpoint_checks(const PairItem& it, const Gates& gt, GateResult& gr,
                                     std::optional<Diagnosis>& named_diagnosis) {
  const CheckpointDiagnosisInput ctx = checkpoint_context(it, gt);
  if (auto m = check_master_precision(ctx)) {
    gr.checks.push_back(m->check);
    if (!m->check.passed) {
      gr.reasons.push_back(m->reason);
      named_diagnosis = std::move(m->diagnosis);
    }
  }
  if (auto u = check_first_update(ctx)) {
    gr.checks.push_back(u->check);
    if (!u->check.passed) gr.reasons.push_back(u->reason);
  }
  if (auto o = check_own_update(ctx)) {
    gr.checks.push_back(o->check);
    if (!o->check.passed) {
      gr.reasons.push_back(o->reason);
      if (!named_diagnosis) named_diagnosis = std::move(o->diagnosis);
    }
  }
  // A failing step<k>_grad_<param> that is the reference's plus the run's previous gradient.
  if (!gr.passed() && !named_diagnosis && opt_.diagnose) named_diagnosis = diagnose_accumulated_gradient(ctx);
}

void Comparer::decide_verdict(const PairItem& it, const Mapped& ref, const Mapped& run_arr, const Gates& gt,
                              const GateResult& gr, std::optional<Diagnosis> named_diagnosis,
                              const ScaleFile* bound_scale, bool has_scale, Entry& e) {
  const TensorStats& s = *e.stats;
  if (!gr.passed()) {
    std::string msg;
    for (const auto& w : gr.reasons) msg += (msg.empty() ? "" : "; ") + w;
    fail(e, msg);
    if (opt_.diagnose && named_diagnosis) {
      e.diagnosis = std::move(named_diagnosis);
    } else if (opt_.diagnose && e.role == ops::Role::checkpoint) {
      e.diagnosis = diagnose_checkpoint(checkpoint_context(it, gt));
    } else if (opt_.diagnose) {
      e.diagnosis = run_diagnosis(it, e, ref, run_arr, gt, s.near_zero_floor, bound_scale);
    }
  } else if (auto why = unchecked_by_value(s, gt, has_scale)) {
    // The gates held, but no element was held to a value (only the data shows it: the policy's
    // element tests are refused at parse time when they check nothing whatever the data).
    e.verdict = Verdict::mistrusted;
    e.message = "not checked by value: " + *why;
    warn_unchecked_by_value(it, e, report_.warnings);
  } else if (s.ref_zero_fraction() > gt.mistrust_zeros) {
    e.verdict = Verdict::mistrusted;
    e.message = fmt::format(
        "{:.1f}% of the reference is exactly zero (> {:.0f}%): a stack returning zeros would "
        "pass too",
        100 * s.ref_zero_fraction(), 100 * gt.mistrust_zeros);
  } else {
    e.verdict = Verdict::passed;
  }
}

CheckpointDiagnosisInput Comparer::checkpoint_context(const PairItem& it, const Gates& gt) const {
  // The update checks and the update's diagnosis have their own tolerances, relative to the
  // update (docs/training.md, "Checkpoints"): a checkpoint gated by its bound alone
  // gives them the fixed rtol it would have without one.
  Gates g = gt;
  if (!g.rtol && !g.atol) g.rtol = legacy_rtol(it.dtype, true) * checkpoint_tolerance_factor(it.tensor);
  return CheckpointDiagnosisInput{it.ref,
                                  *it.op,
                                  it.tensor,
                                  stdfs::path(it.run_file).parent_path().string(),
                                  it.run ? it.run->op(*it.op) : nullptr,
                                  g,
                                  opt_.threads};
}

}  // namespace validate::compare::detail
