// Training trajectories in `validate compare` (trajectory_check.hpp, docs/training.md "How
// compare checks a trajectory"): the loss curve against its growing gate, the checkpoint gates,
// and the per-op summary the reporters show. The checkpoint diagnosis is in
// trajectory_checkpoint.cpp.
#include "validate/train/trajectory_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "validate/metrics/ulp.hpp"
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

void refine_trajectories(std::vector<Entry>& entries, std::vector<std::string>& warnings) {
  using Key = std::tuple<std::string, std::string, std::string, ops::Op>;
  std::map<Key, std::vector<Entry*>> by_op;
  std::vector<Key> order;
  for (auto& e : entries) {
    if (!e.op || e.tensor.empty()) continue;
    Key k{e.variant, e.dtype, e.case_name, *e.op};
    if (!by_op.count(k)) order.push_back(k);
    by_op[k].push_back(&e);
  }
  for (const Key& k : order) {
    Entry* curve = nullptr;
    std::vector<Entry*> checkpoints;
    for (Entry* e : by_op[k]) {
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
      // At one step, a named mistake before an unnamed one, and a parameter before the gradients
      // computed from it (a wrong parameter at step k makes its gradients wrong too).
      auto rank = [](const Entry* x) {
        const bool named = x->diagnosis && x->diagnosis->named();
        const auto cx = train::parse_checkpoint_tensor(x->tensor);
        const bool gradient = cx && cx->tensor.rfind("grad_", 0) == 0;
        return (named ? 0 : 2) + (gradient ? 1 : 0);
      };
      if (!first || s < first_step || (s == first_step && rank(e) < rank(first))) {
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
      dx.follows_from = first->tensor;
      dx.summary = fmt::format("follows from the trajectory parting at step {} (first bad checkpoint {}{}): a checkpoint "
                               "at or after it differs by consequence",
                               first_step, first->tensor, named ? ": " + named->code : std::string());
      e->diagnosis = std::move(dx);
    }
  }
}

}  // namespace validate::compare
