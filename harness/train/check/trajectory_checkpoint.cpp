// The checkpoints of a training case in `validate compare` (trajectory_check.hpp): the first
// update checked as the gradient it applied, and a failing parameter checkpoint diagnosed through
// its update (step<k> - step<j> against the reference's), where a dW applied in the wrong layout
// shows.
#include "validate/train/trajectory_check.hpp"

#include "validate/diagnosis/named_diagnosis.hpp"
#include "trajectory_files.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "validate/metrics/ulp.hpp"
#include "validate/core/dtype.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/npy.hpp"
#include "validate/train/tensor_names.hpp"
#include "validate/train/trajectory_gate.hpp"

namespace validate::compare {

using detail::find_tensor;
using detail::load;
using detail::produced;

namespace {

std::string declared_layout(const cases::OpRunRecord* run, const std::string& tensor, const std::string& param) {
  if (!run || !run->layouts) return "";
  for (const std::string& k : {tensor, param}) {
    auto it = run->layouts->find(k);
    if (it != run->layouts->end()) return it->second;
  }
  return "";
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
  const detail::CaseFiles files{in};
  auto r1 = files.ref(in.tensor, info->shape), r0 = files.ref(from, info->shape);
  auto u1 = files.run(in.tensor, info->shape), u0 = files.run(from, info->shape);
  if (!r1 || !r0 || !u1 || !u0) return std::nullopt;
  const std::int64_t n = r1->numel();
  double max_ref = 0;
  for (std::int64_t i = 0; i < n; ++i) max_ref = std::max(max_ref, std::fabs(r1->get(i) - r0->get(i)));
  const double floor = std::max(in.gates.near_zero * max_ref, 1e-30);
  std::int64_t beyond = 0, worst = -1;
  double worst_ratio = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double dr = r1->get(i) - r0->get(i), du = u1->get(i) - u0->get(i);
    const double tol = (relative ? *in.gates.rtol * std::max(std::fabs(dr), floor) : *in.gates.atol) +
                       4 * float32_ulp(std::max(std::fabs(r1->get(i)), std::fabs(r0->get(i))));
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

std::optional<CheckpointCheck> check_master_precision(const CheckpointDiagnosisInput& in) {
  if (!in.ref || !in.ref->c.train) return std::nullopt;
  const cases::Case& c = in.ref->c;
  if (c.dtype != DType::bfloat16 && c.dtype != DType::float16) return std::nullopt;
  const auto name = train::parse_checkpoint_tensor(in.tensor);
  if (!name || name->step < 1 || name->tensor.rfind("grad_", 0) == 0) return std::nullopt;
  const auto all = c.tensors(in.op);
  const cases::TensorInfo* info = find_tensor(all, in.tensor);
  if (!info) return std::nullopt;
  const detail::CaseFiles files{in};
  auto ref_k = files.ref(in.tensor, info->shape), run_k = files.run(in.tensor, info->shape);
  if (!ref_k || !run_k) return std::nullopt;
  // A float32 value lies on the bfloat16 grid with probability ~2^-16 (16 low mantissa bits zero),
  // on the float16 grid ~2^-13: a float32 master that moved off the grid stays off it.
  auto on_grid = [&](double v) {
    const float f = static_cast<float>(v);
    return std::isfinite(f) && round_to_dtype(f, c.dtype) == f;
  };
  std::int64_t off = 0, run_on = 0, first = -1;
  for (std::int64_t i = 0; i < ref_k->numel(); ++i) {
    if (on_grid(ref_k->get(i))) continue;
    ++off;
    if (on_grid(run_k->get(i))) {
      ++run_on;
      if (first < 0) first = i;
    }
  }
  if (off < kMasterGridMinElements) return std::nullopt;  // too few to tell a grid from chance
  const double fraction = static_cast<double>(run_on) / static_cast<double>(off);
  CheckpointCheck m;
  m.check = Check{"master_on_case_dtype_grid", fraction, kMasterGridMaxFraction, true, fraction <= kMasterGridMaxFraction};
  if (m.check.passed) return m;
  const std::string dt(dtype_name(c.dtype));
  const std::string param = name->tensor;
  // Updates lost whole: the parameter did not move from step 0 where the reference's did (an
  // update below half a ULP of the parameter rounds away).
  std::string lost;
  const std::string from = train::checkpoint_tensor(0, param);
  if (produced(in.run, from)) {
    auto ref_0 = files.ref(from, info->shape), run_0 = files.run(from, info->shape);
    if (ref_0 && run_0) {
      std::int64_t moved = 0, stuck = 0;
      for (std::int64_t i = 0; i < ref_k->numel(); ++i)
        if (ref_k->get(i) != ref_0->get(i)) {
          ++moved;
          if (run_k->get(i) == run_0->get(i)) ++stuck;
        }
      if (stuck > 0)
        lost = fmt::format("; {} of the {} elements the reference moved since step 0 never moved in the run (updates "
                           "below half a {} ULP of the {} round away)",
                           stuck, moved, dt, param);
    }
  }
  m.reason = fmt::format(
      "{} of {} values of {} lie on the {} grid where the reference's float32 master does not (first at {}: reference "
      "{:.9g}, run {:.9g}): the run keeps its {} master in {}{}",
      run_on, off, in.tensor, dt, format_coords(first, info->shape, info->canonical_axes), ref_k->get(first),
      run_k->get(first), param, dt, lost);
  Hypothesis h;
  h.code = "narrow_master";
  h.tensor = param;
  h.side = "numeric";
  h.family = "master_precision";
  h.spec = dt;
  h.params = {{"dtype", dt}, {"parameter", param}, {"step", name->step}, {"on_grid", run_on}, {"off_grid_in_reference", off}};
  const std::string how_many = run_on == off ? fmt::format("all {}", off) : fmt::format("{} of the {}", run_on, off);
  h.description = fmt::format("master {} kept in {}: {} elements of {} that the reference's float32 master holds off the "
                              "{} grid are {} values in the run",
                              param, dt, how_many, in.tensor, dt, dt);
  h.cause = fmt::format("the optimizer updates a {} copy of {} (or the checkpoint was written through {}); mixed "
                        "precision keeps float32 masters, updates them with the cast gradients, and casts them to {} "
                        "only for the forward",
                        dt, param, dt, dt);
  h.fix = fmt::format("keep {} in float32, apply the update there, and cast a copy to {} for each forward", param, dt);
  m.diagnosis = detail::named_on_every_element(std::move(h), off);
  return m;
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
  const detail::CaseFiles files{in};
  auto ref_k = files.ref(in.tensor, info->shape);
  auto run_k = files.run(in.tensor, info->shape);
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
      ref_j = files.ref(tj, info->shape);
      run_j = files.run(tj, info->shape);
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
  // Adam's first update is lr (g + wd w0) / (|g + wd w0| + eps), nearly lr times the gradient's
  // sign: it cannot be undone into a gradient, so it is diagnosed as the update itself (a
  // permutation of the gradient permutes its signs alike).
  const train::TrainConfig& tc = *c.train;
  const bool first_update = tc.optimizer == train::Optimizer::sgd && j && *j == 0 && name->step == 1;
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


}  // namespace validate::compare
