// Training trajectories in `validate compare` (trajectory_check.hpp, docs/compare.md "Training
// trajectories"): the loss curve against its growing gate, the checkpoint gates, the diagnosis of a
// failing checkpoint through its update, and the per-op summary the reporters show.
#include "validate/compare/trajectory_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "validate/compare/ulp.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/npy.hpp"
#include "validate/train/tensor_names.hpp"
#include "validate/train/trajectory_gate.hpp"

namespace validate::compare {

namespace stdfs = std::filesystem;

namespace {

double value(const ArrayView& v, std::int64_t i) {
  const std::byte* p = v.data + i * static_cast<std::int64_t>(dtype_size(v.storage));
  switch (v.storage) {
    case DType::float64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case DType::float16: {
      std::uint16_t h;
      std::memcpy(&h, p, 2);
      return float16_bits_to_float(h);
    }
    default: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
  }
}

std::vector<double> values(const ArrayView& v) {
  std::vector<double> out(static_cast<std::size_t>(std::max<std::int64_t>(v.numel, 0)));
  for (std::int64_t i = 0; i < v.numel; ++i) out[static_cast<std::size_t>(i)] = value(v, i);
  return out;
}

const char* kind_name(train::Divergence::Kind k) {
  switch (k) {
    case train::Divergence::Kind::none: return "none";
    case train::Divergence::Kind::drift: return "drift";
    case train::Divergence::Kind::mistake: return "mistake";
  }
  return "none";
}

}  // namespace

std::optional<std::string> check_loss_curve(const ArrayView& ref_view, const ArrayView& run_view,
                                            const Shape& run_shape, std::int64_t steps,
                                            const Gates& gates, Entry& e) {
  TrajectoryStats t;
  t.steps = steps;
  t.ref = values(ref_view);
  t.run = values(run_view);
  if (static_cast<std::int64_t>(t.ref.size()) != steps)
    return fmt::format("reference: train_loss holds {} values for a case of {} steps", t.ref.size(), steps);
  for (std::size_t s = 0; s < t.ref.size(); ++s)
    if (!std::isfinite(t.ref[s]))
      return fmt::format("reference: train_loss is {} at step {}: a non-finite reference loss is a broken "
                         "reference, and nothing can be checked against it",
                         t.ref[s], s);
  std::vector<std::string> why;
  auto check = [&](const std::string& name, double v, double limit, bool upper) {
    const bool ok = upper ? v <= limit : v >= limit;
    e.checks.push_back(Check{name, v, limit, upper, ok});
    return ok;
  };
  // 1. The length: a curve that stops early (a crash, a loop bound off by one, only the checkpoint
  //    steps reported) must not pass on the steps it has.
  const std::int64_t n = static_cast<std::int64_t>(t.run.size());
  if (!check("loss_curve_length_mismatch", std::fabs(static_cast<double>(n - steps)), 0, true)) {
    why.push_back(fmt::format("the run's train_loss has {} value{} but the case trains {} steps: {}", n,
                              n == 1 ? "" : "s", steps,
                              n < steps ? "the curve is too short (did the loop stop early, or report only the checkpoint steps?)"
                                        : "the curve is too long (an extra step, or a loss logged twice?)"));
  } else if (run_shape != Shape{steps}) {
    e.checks.back().passed = false;  // the count is right, the shape is not
    why.push_back(fmt::format("the run's train_loss has shape {}, expected [{}]", shape_to_string(run_shape), steps));
  }
  // 2. The gate, per step over the steps both curves have.
  if (!gates.loss_rel) {
    check("loss_curve_gate", 1, 0, true);
    why.push_back(fmt::format("the policy sets no loss_rel for role loss_curve ({}): a loss curve without a "
                              "gate cannot pass (set e.g. --gate {}.loss_curve.loss_rel=1e-6)",
                              e.dtype, e.dtype));
  } else {
    t.r0 = *gates.loss_rel;
    t.rel_error = train::relative_errors(t.run, t.ref);
    for (std::size_t s = 0; s < t.rel_error.size(); ++s) {
      t.gate.push_back(train::loss_gate(static_cast<std::int64_t>(s), t.r0));
      if (!std::isfinite(t.run[s])) t.rel_error[s] = std::numeric_limits<double>::quiet_NaN();
    }
    std::int64_t nonfinite = 0, first_nonfinite = -1;
    for (std::size_t s = 0; s < t.rel_error.size(); ++s)
      if (!std::isfinite(t.run[s])) {
        ++nonfinite;
        if (first_nonfinite < 0) first_nonfinite = static_cast<std::int64_t>(s);
      }
    if (!check("loss_curve_nonfinite", static_cast<double>(nonfinite), 0, true))
      why.push_back(fmt::format("the run's loss is {} at step {} ({} of {} steps not finite)",
                                t.run[static_cast<std::size_t>(first_nonfinite)], first_nonfinite, nonfinite,
                                t.rel_error.size()));
    double worst = 0;
    for (std::size_t s = 0; s < t.rel_error.size(); ++s)
      if (std::isfinite(t.rel_error[s])) worst = std::max(worst, t.rel_error[s] / t.gate[s]);
    const train::Divergence d = train::classify_divergence(t.rel_error, t.r0);
    t.kind = kind_name(d.kind);
    t.first_bad_step = d.first_bad_step;
    t.error = d.error;
    t.gate_at = d.gate;
    t.growth = d.growth;
    t.sentence = d.sentence();
    if (!check("loss_curve_gate", worst, 1, true) || d.kind != train::Divergence::Kind::none) {
      if (e.checks.back().name == "loss_curve_gate") e.checks.back().passed = false;
      why.insert(why.begin(), t.sentence);
    }
    // The worst step, for the tables (max abs, float32 ULP of the loss there); NaN when a step's
    // run loss is not finite.
    LossStats l;
    std::size_t at = 0;
    for (std::size_t s = 0; s < t.rel_error.size(); ++s) {
      if (!std::isfinite(t.run[s])) continue;
      const double a = std::fabs(t.run[s] - t.ref[s]);
      if (a > l.abs_diff) {
        l.abs_diff = a;
        at = s;
      }
      l.rel_diff = std::max(l.rel_diff, t.rel_error[s]);
    }
    if (!t.rel_error.empty()) {
      l.ref = t.ref[at];
      l.run = t.run[at];
      if (std::isfinite(l.run))
        l.ulp = ulp_distance(static_cast<float>(l.ref), static_cast<float>(l.run), DType::float32);
    }
    if (nonfinite > 0) l.abs_diff = l.rel_diff = std::numeric_limits<double>::quiet_NaN();
    e.loss = l;
  }
  if (t.sentence.empty() && !why.empty()) t.sentence = why.front();
  if (t.kind == "none" && !why.empty()) {
    // The curve could not be judged to its end (wrong length, no gate): a failure all the same.
    t.kind = "mistake";
    if (t.first_bad_step < 0) t.first_bad_step = std::min<std::int64_t>(n, steps);
    t.sentence = why.front();
  }
  e.trajectory = std::move(t);
  if (why.empty()) {
    e.verdict = Verdict::passed;
  } else {
    e.verdict = Verdict::failed;
    std::string msg;
    for (const auto& w : why) msg += (msg.empty() ? "" : "; ") + w;
    e.message = msg;
  }
  return std::nullopt;
}

double checkpoint_tolerance_factor(const std::string& tensor) {
  const auto c = train::parse_checkpoint_tensor(tensor);
  return c ? std::sqrt(1.0 + static_cast<double>(c->step)) : 1.0;
}

Gates checkpoint_gates(Gates g, const std::string& tensor) {
  const double f = checkpoint_tolerance_factor(tensor);
  if (g.atol) *g.atol *= f;
  if (g.rtol) *g.rtol *= f;
  if (g.max_ulp) *g.max_ulp = std::ceil(*g.max_ulp * f);
  return g;
}

namespace {

const cases::TensorInfo* find_tensor(const std::vector<cases::TensorInfo>& all, const std::string& name) {
  for (const auto& t : all)
    if (t.name == name) return &t;
  return nullptr;
}

std::string declared_layout(const cases::OpRunRecord* run, const std::string& tensor, const std::string& param) {
  if (!run || !run->layouts) return "";
  for (const std::string& k : {tensor, param}) {
    auto it = run->layouts->find(k);
    if (it != run->layouts->end()) return it->second;
  }
  return "";
}

bool produced(const cases::OpRunRecord* run, const std::string& tensor) {
  return run && std::find(run->produced.begin(), run->produced.end(), tensor) != run->produced.end();
}

std::optional<Tensor> load(const std::string& path, const Shape& shape) {
  if (!fs::exists(path)) return std::nullopt;
  auto t = npy::read(path);
  if (!t || t->shape() != shape) return std::nullopt;
  return std::move(*t);
}

// "dW" for weight, "db" for bias, "dB" for a matmul's B: how a training loop names the gradient.
std::string grad_symbol(const std::string& param) {
  if (param == "weight") return "dW";
  if (param == "bias") return "db";
  return "d" + param;
}

}  // namespace

std::optional<UpdateCheck> check_first_update(const CheckpointDiagnosisInput& in) {
  if (!in.ref || !in.ref->c.train) return std::nullopt;
  const auto name = train::parse_checkpoint_tensor(in.tensor);
  if (!name || name->step != 1 || name->tensor.rfind("grad_", 0) == 0) return std::nullopt;
  const bool relative = in.gates.rtol.has_value();
  if (!relative && !in.gates.atol) return std::nullopt;
  const cases::Case& c = in.ref->c;
  const auto all = c.tensors(in.op);
  const cases::TensorInfo* info = find_tensor(all, in.tensor);
  const std::string from = train::checkpoint_tensor(0, name->tensor);
  if (!info || !produced(in.run, from)) return std::nullopt;
  auto path_ref = [&](const std::string& t) { return (stdfs::path(in.ref->dtype_dir) / c.file_name(in.op, t)).string(); };
  auto path_run = [&](const std::string& t) { return (stdfs::path(in.run_dir) / c.file_name(in.op, t)).string(); };
  auto r1 = load(path_ref(in.tensor), info->shape), r0 = load(path_ref(from), info->shape);
  auto u1 = load(path_run(in.tensor), info->shape), u0 = load(path_run(from), info->shape);
  if (!r1 || !r0 || !u1 || !u0) return std::nullopt;
  const std::int64_t n = r1->numel();
  double max_ref = 0;
  for (std::int64_t i = 0; i < n; ++i) max_ref = std::max(max_ref, std::fabs(r1->get(i) - r0->get(i)));
  const double floor = std::max(in.gates.near_zero * max_ref, 1e-30);
  auto ulp32 = [](double x) {
    const float f = static_cast<float>(std::fabs(x));
    return static_cast<double>(std::nextafter(f, INFINITY)) - static_cast<double>(f);
  };
  std::int64_t beyond = 0, worst = -1;
  double worst_ratio = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double dr = r1->get(i) - r0->get(i), du = u1->get(i) - u0->get(i);
    const double tol = (relative ? *in.gates.rtol * std::max(std::fabs(dr), floor) : *in.gates.atol) +
                       4 * ulp32(std::max(std::fabs(r1->get(i)), std::fabs(r0->get(i))));
    const double err = std::fabs(du - dr);
    const double ratio = std::isnan(err) ? INFINITY : err / tol;
    if (ratio > 1) ++beyond;
    if (worst < 0 || ratio > worst_ratio) worst = i, worst_ratio = ratio;
  }
  UpdateCheck u;
  u.check = Check{"update_beyond_tolerance", static_cast<double>(beyond), 0, true, beyond == 0};
  if (beyond > 0) {
    const double dr = r1->get(worst) - r0->get(worst), du = u1->get(worst) - u0->get(worst);
    u.reason = fmt::format(
        "{} of {} elements of the first update ({} − {}) beyond tolerance ({} {:.3g} of the update, + 4 float32 ULP "
        "of the {}); worst at {}: reference update {:.4g}, run update {:.4g} — the step that moved the {} is wrong",
        beyond, n, in.tensor, from, relative ? "rtol" : "atol", relative ? *in.gates.rtol : *in.gates.atol,
        name->tensor, format_coords(worst, info->shape, info->canonical_axes), dr, du, name->tensor);
  }
  return u;
}

std::optional<Diagnosis> diagnose_checkpoint(const CheckpointDiagnosisInput& in) {
  if (!in.ref || !in.ref->c.train) return std::nullopt;
  const auto name = train::parse_checkpoint_tensor(in.tensor);
  if (!name) return std::nullopt;
  const cases::Case& c = in.ref->c;
  const auto all = c.tensors(in.op);
  const cases::TensorInfo* info = find_tensor(all, in.tensor);
  if (!info) return std::nullopt;
  const bool grad = name->tensor.rfind("grad_", 0) == 0;
  const std::string param = grad ? name->tensor.substr(5) : name->tensor;
  auto path_ref = [&](const std::string& t) { return (stdfs::path(in.ref->dtype_dir) / c.file_name(in.op, t)).string(); };
  auto path_run = [&](const std::string& t) { return (stdfs::path(in.run_dir) / c.file_name(in.op, t)).string(); };
  auto ref_k = load(path_ref(in.tensor), info->shape);
  auto run_k = load(path_run(in.tensor), info->shape);
  if (!ref_k || !run_k) return std::nullopt;

  DiagnosisInput d;
  d.shape = info->shape;
  d.run_shape = info->shape;
  d.axes = info->canonical_axes;
  d.op = in.op;
  d.logical = c.dtype;
  d.declared_layout = declared_layout(in.run, in.tensor, grad ? name->tensor : param);
  if (in.run && in.run->layouts) d.declared = *in.run->layouts;
  // Element test: the tensor's own relative tolerance (at least 1e-3), no ULP gate, and for an
  // update an absolute floor (set below): an update is the difference of two float32 weights, so it
  // carries their rounding relative to |w|, not to |dW|, and terms the layout mistake does not
  // touch (weight decay reads the weights in their own layout: lr * wd * |w - P(w)|, ~1e-4 of the
  // update) — a wrong reading is off by the size of the update itself.
  d.rtol = std::max(in.gates.rtol.value_or(0), 1e-3);
  d.atol = in.gates.atol;

  // The earlier checkpoint both sides have, for the update.
  std::optional<std::int64_t> j;
  std::optional<Tensor> ref_j, run_j;
  if (!grad) {
    const auto steps = train::checkpoint_steps(*c.train);
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      if (*it >= name->step) continue;
      const std::string tj = train::checkpoint_tensor(*it, param);
      if (!produced(in.run, tj)) continue;
      ref_j = load(path_ref(tj), info->shape);
      run_j = load(path_run(tj), info->shape);
      if (ref_j && run_j) {
        j = *it;
        break;
      }
    }
  }
  // The first update (step 0 to 1) is one SGD step on step 0's gradient g with nothing in the
  // momentum buffer yet (torch.optim.SGD): w1 = w0 - lr (1 + mu if Nesterov) (g + wd w0). Undoing
  // it, (w0 - w1) / (lr (1 + mu)) - wd w0 is the gradient the program applied, exactly up to
  // rounding: weight decay reads the weights in their own layout, so left in the update it blurs
  // the layout reading (wd 1e-3 left the Fortran example's KRSC mistake unnamed). A later update
  // mixes several steps' gradients through the momentum buffer and is diagnosed as the difference.
  const bool first_update = j && *j == 0 && name->step == 1;
  const train::TrainConfig& tc = *c.train;
  const double step_scale = first_update ? tc.lr * (tc.nesterov ? 1 + tc.momentum : 1.0) : 1.0;
  Tensor dref, drun;
  if (j) {
    dref = Tensor(DType::float32, info->shape);
    drun = Tensor(DType::float32, info->shape);
    for (std::int64_t i = 0; i < dref.numel(); ++i) {
      if (first_update) {
        dref.set(i, (ref_j->get(i) - ref_k->get(i)) / step_scale - tc.weight_decay * ref_j->get(i));
        drun.set(i, (run_j->get(i) - run_k->get(i)) / step_scale - tc.weight_decay * run_j->get(i));
      } else {
        dref.set(i, ref_k->get(i) - ref_j->get(i));
        drun.set(i, run_k->get(i) - run_j->get(i));
      }
    }
  }
  const Tensor& R = j ? dref : *ref_k;
  const Tensor& U = j ? drun : *run_k;
  d.ref = view_of(R);
  d.run = view_of(U);
  d.tensor = grad ? name->tensor : param;
  d.role = grad ? ops::Role::grad : ops::Role::checkpoint;
  const RefScan sc = scan_reference(d.ref, d.logical, in.threads);
  d.floor = std::max(in.gates.near_zero * sc.max_abs, 1e-30);
  if (j) {
    // Each side's update is the difference of two stored (rounded) parameters: at most 2 unit
    // roundoffs of |w| each, so 4 * eps * max|w| between the sides, whatever the update's size.
    const double w_max = std::max(scan_reference(view_of(*ref_k), d.logical, in.threads).max_abs,
                                  scan_reference(view_of(*ref_j), d.logical, in.threads).max_abs);
    const double rounding = 4 * std::ldexp(1.0, -24) * w_max / step_scale;
    if (rounding > 0.05 * sc.max_abs) {
      // An update that small (a tiny rate, a converged parameter) is mostly rounding: every reading
      // of it would "fit". Say so rather than name one.
      Diagnosis dx;
      dx.summary = fmt::format(
          "the update of {} from step {} to step {} (max {:.3g}) is too small against the float32 rounding of the "
          "stored {} ({:.3g}) to tell a layout from another",
          param, *j, name->step, sc.max_abs, param, rounding);
      return dx;
    }
    d.atol = std::max(d.atol.value_or(0), 1e-3 * sc.max_abs + rounding);
  }
  Diagnosis dx = diagnose(d);
  if (!j) {
    if (dx.tried > 0) dx.summary = diagnosis_summary(dx, in.tensor);
    return dx;
  }
  // The update: a layout reading of it is "the update applied with dW in that layout".
  const std::string from = train::checkpoint_tensor(*j, param);
  const std::string subject =
      first_update ? fmt::format("the gradient the first update applied to {} (({} − {}) / lr{} − weight_decay·{})", param,
                                 from, in.tensor, tc.nesterov ? "(1 + momentum)" : "", from)
                   : fmt::format("the update of {} from step {} to step {} ({} − {})", param, *j, name->step, in.tensor, from);
  for (Hypothesis& h : dx.matches) {
    if (h.family != "output_layout") continue;
    const std::string g = grad_symbol(param);
    const std::string alias = h.spec == "OHWI" ? " (cuDNN's KRSC)" : "";
    h.params["reading"] = h.code;
    h.params["layout"] = h.spec;
    h.params["from_step"] = *j;
    h.params["to_step"] = name->step;
    h.params["parameter"] = param;
    h.code = "update_layout";
    h.description = fmt::format("update applied with {} in {}{} layout: {} equals the reference's read as {}", g,
                                h.spec, alias, subject, h.spec);
    h.cause = fmt::format("the gradient handed to the optimizer in {}{} while the {} it updates is stored as {} "
                          "(cuDNN returns dW in its filter descriptor's layout)",
                          h.spec, alias, param, d.declared_layout.empty() ? d.axes : d.declared_layout);
    h.fix = fmt::format("convert {} to the layout of the stored {} before the update (or keep both in one layout)",
                        g, param);
  }
  std::string s;
  if (const Hypothesis* h = dx.named()) {
    if (h->code == "update_layout") {
      s = h->description + " — " + h->cause + "?";
      if (!h->confirmed_all && h->checked > 1) s += fmt::format(" (checked on {} sampled elements)", h->checked);
      s += " Fix: " + h->fix + ".";
      if (dx.ambiguous) s += " Other readings fit equally on this shape.";
    } else {
      s = subject + ": " + diagnosis_summary(dx, param);
    }
  } else if (dx.tried > 0) {
    s = subject + ": " + diagnosis_summary(dx, param);
  }
  dx.summary = s;
  return dx;
}

void refine_trajectories(std::vector<Entry>& entries, std::vector<std::string>& warnings) {
  using Key = std::tuple<std::string, std::string, std::string, ops::Op>;
  std::map<Key, std::vector<Entry*>> ops;
  std::vector<Key> order;
  for (auto& e : entries) {
    if (!e.op || e.tensor.empty()) continue;
    Key k{e.variant, e.dtype, e.case_name, *e.op};
    if (!ops.count(k)) order.push_back(k);
    ops[k].push_back(&e);
  }
  for (const Key& k : order) {
    Entry* curve = nullptr;
    std::vector<Entry*> checkpoints;
    for (Entry* e : ops[k]) {
      if (e->role == ops::Role::loss_curve) curve = e;
      if (e->role == ops::Role::checkpoint) checkpoints.push_back(e);
    }
    if (!curve) continue;
    if (curve->verdict == Verdict::not_run || curve->verdict == Verdict::not_requested)
      warnings.push_back(fmt::format(
          "{}{}/{}/{} is a training case but the run returned no trajectory (train_loss {}): only its step 0 "
          "was checked; --require-all makes this a failure",
          std::get<0>(k).empty() ? "" : "[" + std::get<0>(k) + "] ", std::get<1>(k), std::get<2>(k), ops::op_name(std::get<3>(k)),
          compare::verdict_name(curve->verdict)));
    if (!curve->trajectory) continue;
    std::int64_t missing = 0;
    for (const Entry* e : checkpoints) missing += e->verdict == Verdict::not_run || e->verdict == Verdict::not_requested;
    if (missing > 0)
      warnings.push_back(fmt::format(
          "{}{}/{}/{}: the run returned the loss curve but {} of {} checkpoints are not run: the parameters and "
          "their updates were not checked there (--require-all makes this a failure)",
          std::get<0>(k).empty() ? "" : "[" + std::get<0>(k) + "] ", std::get<1>(k), std::get<2>(k), ops::op_name(std::get<3>(k)),
          missing, checkpoints.size()));
    TrajectoryStats& t = *curve->trajectory;
    const Entry* first = nullptr;
    std::int64_t first_step = -1;
    for (const Entry* e : checkpoints) {
      if (e->verdict == Verdict::passed || e->verdict == Verdict::mistrusted) ++t.checkpoints_compared;
      if (!(is_failure(e->verdict) || e->verdict == Verdict::invalid)) continue;
      ++t.checkpoints_compared;
      ++t.checkpoints_failed;
      const auto c = train::parse_checkpoint_tensor(e->tensor);
      const std::int64_t s = c ? c->step : -1;
      if (!first || s < first_step) {
        first = e;
        first_step = s;
      }
    }
    if (!first) continue;
    t.first_bad_checkpoint = first->tensor;
    t.first_bad_checkpoint_step = first_step;
    const Hypothesis* named = first->diagnosis ? first->diagnosis->named() : nullptr;
    if (first->diagnosis) {
      t.checkpoint_diagnosis = first->diagnosis->summary;
      if (named) t.checkpoint_diagnosis_code = named->code;
    }
    // Once the trajectory has parted, every later checkpoint (and the gradients of the same step,
    // computed from the wrong parameters) differs by consequence: a "closest hypothesis" for them
    // is noise that buries the one diagnosis that matters. Their own named mistakes are kept.
    for (Entry* e : checkpoints) {
      if (e == first || e->verdict != Verdict::failed) continue;
      if (e->diagnosis && e->diagnosis->named()) continue;
      const auto c = train::parse_checkpoint_tensor(e->tensor);
      if (!c || c->step < first_step) continue;
      if (c->step == first_step && c->tensor.rfind("grad_", 0) != 0) continue;  // a parameter of that step: its own
      Diagnosis dx;
      dx.tried = e->diagnosis ? e->diagnosis->tried : 0;
      dx.families = e->diagnosis ? e->diagnosis->families : std::vector<std::string>{};
      dx.summary = fmt::format("follows from the trajectory parting at step {} (first bad checkpoint {}{}): a checkpoint "
                               "at or after it differs by consequence",
                               first_step, first->tensor, named ? ": " + named->code : std::string());
      e->diagnosis = std::move(dx);
    }
  }
}

}  // namespace validate::compare
