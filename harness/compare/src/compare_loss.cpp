// The 0-d loss: its gates, the loss-on-stored-output check, and the loss diagnosis.
#include "comparer.hpp"

#include "compare_algorithm.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <type_traits>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "validate/core/json_io.hpp"
#include "validate/metrics/bounds.hpp"
#include "validate/metrics/ulp.hpp"
#include "validate/core/fs.hpp"
#include "validate/ops/registry.hpp"

namespace validate::compare::detail {

namespace stdfs = std::filesystem;

namespace {

// The two-stack loss bound of an op from the reference set: its output, the output's error-bound
// scale, the target and the bias (bounds.hpp, loss_bound). nullopt when the set has no output
// scale (made before scales existed).
std::optional<Result<LossBound>> reference_loss_bound(const PairItem& it, const Entry& e, const Gates& gt,
                                                      double ref_loss, const std::vector<double>& extra) {
  const std::string op = e.op_name();
  Shape shape;
  for (const auto& t : it.ref->c.tensors(*it.op))
    if (t.role == ops::Role::output) shape = t.shape;
  auto s = open_scale(it, op, "output", shape, {"rss_products"});
  if (!s) return Result<LossBound>(s.status());
  if (!*s) return std::nullopt;
  const stdfs::path dir = stdfs::path(it.ref_file).parent_path();
  auto y = open_npy((dir / it.ref->c.file_name(*it.op, "output")).string());
  if (!y) return Result<LossBound>(Error{"reference: loss bound: " + y.message()});
  auto t = open_npy((dir / it.ref->c.file_name(*it.op, "target")).string());
  if (!t) return Result<LossBound>(Error{"reference: loss bound: " + t.message()});
  auto o = bound_options(it, e, ops::Role::output, gt);  // the output's, as its own gate has them
  if (!o) return Result<LossBound>(o.status());
  o->scale_unit = (*s)->unit;
  if (!extra.empty()) {
    if (static_cast<std::int64_t>(extra.size()) != y->view().numel)
      return Result<LossBound>(Error{"the output's algorithm term and the output differ in element count"});
    o->run_extra = extra.data();
  }
  return loss_bound(y->view(), (*s)->map.view(), t->view(), *o, ref_loss);
}

// loss_floor (bounds.hpp) of the reference set's own output, target and loss: what its roundings
// already put into the stored loss; and `algorithm`, the run output's algorithm term carried into
// the loss (loss_algorithm_term), which a fixed loss_abs / loss_rel gains on top.
struct LossFloor {
  double floor = 0, algorithm = 0;
};

Result<LossFloor> reference_loss_floor(const PairItem& it, double ref_loss, const std::vector<double>& extra) {
  const stdfs::path dir = stdfs::path(it.ref_file).parent_path();
  const stdfs::path yf = dir / it.ref->c.file_name(*it.op, "output"), tf = dir / it.ref->c.file_name(*it.op, "target");
  std::error_code ec;
  if (!stdfs::exists(yf, ec) || !stdfs::exists(tf, ec)) return LossFloor{};  // a loss of no stored output: no floor
  auto y = open_npy(yf.string());
  if (!y) return Error{"reference: loss floor: " + y.message()};
  auto t = open_npy(tf.string());
  if (!t) return Error{"reference: loss floor: " + t.message()};
  auto f = loss_floor(y->view(), t->view(), it.ref->c.dtype, ref_loss);
  if (!f) return f.status();
  if (!extra.empty() && static_cast<std::int64_t>(extra.size()) != y->view().numel)
    return Error{"the output's algorithm term and the output differ in element count"};
  return LossFloor{*f, extra.empty() ? 0.0 : loss_algorithm_term(y->view(), t->view(), extra.data())};
}

}  // namespace

void Comparer::compare_loss(const PairItem& it, const Mapped& ref, const Mapped& run,
                            const Gates& gt, Entry& e) {
  LossStats l;
  l.ref = scalar_value(ref.view());
  l.run = scalar_value(run.view());
  l.abs_diff = std::fabs(l.run - l.ref);
  l.rel_diff = l.ref != 0 ? l.abs_diff / std::fabs(l.ref) : (l.abs_diff == 0 ? 0 : INFINITY);
  // A mean of squares is finite for finite outputs: an infinite reference loss is as broken as a
  // NaN one, and an infinite run matching it would check nothing.
  if (!std::isfinite(l.ref))
    return invalid(e, "reference: " + it.ref_file + " is " + (std::isnan(l.ref) ? "NaN" : "infinite") +
                          ": a non-finite reference loss is a broken reference, and nothing can be "
                          "checked against it");
  const bool finite = std::isfinite(l.ref) && std::isfinite(l.run);
  if (finite)
    l.ulp = ulp_distance(static_cast<float>(l.ref), static_cast<float>(l.run), DType::float32);
  e.loss = l;
  std::vector<std::string> why;
  auto check = [&](const std::string& name, double value, double limit, bool upper) {
    const bool ok = upper ? value <= limit : value >= limit;
    e.checks.push_back(Check{name, value, limit, upper, ok});
    return ok;
  };
  if (!finite) {
    const bool agree = (std::isnan(l.ref) && std::isnan(l.run)) || l.ref == l.run;
    if (!check("nonfinite_mismatch", agree ? 0 : 1, 0, true))
      why.push_back(fmt::format("loss is not finite (ref {}, run {})", l.ref, l.run));
  }
  // The run's output computed by a Winograd, FFT or `any` algorithm: its term (lambda T, the
  // output's lambda) carried into the loss through dL/dy, on top of every limit below.
  std::vector<double> alg;
  if (finite) {
    const Gates og = opt_.policy.resolve(TensorKey{it.dtype, *it.op, ops::Role::output, "output"});
    auto ab = output_algorithm_bound(it, og.bound.value_or(8.0), opt_.threads);
    if (!ab) return invalid(e, ab.message());
    alg = std::move(ab->extra);
    if (!alg.empty())
      e.algorithm = ab->algorithm, e.bound_model = fmt::format("loss + the output's {} error through dL/dy", ab->algorithm);
  }
  const std::string alg_note = alg.empty() ? "" : fmt::format(" and the output's {} error", e.algorithm);
  // The derived gate (bfloat16 and float16 by default): the outputs' error bounds carried into the
  // loss. A set without output scales falls back to the old fixed loss_abs, with a note.
  std::optional<double> loss_abs = gt.loss_abs;
  if (gt.bound && finite) {
    if (auto lb = reference_loss_bound(it, e, gt, l.ref, alg)) {
      if (!*lb) return invalid(e, lb->message());
      const LossBound& b = **lb;
      if (!check("loss_bound", l.abs_diff, b.bound, true))
        why.push_back(fmt::format("loss differs by {:.3g} (> {:.3g}, the outputs' error bounds{} carried into the "
                                  "loss, lambda {:.3g}): ref {:.9g}, run {:.9g}",
                                  l.abs_diff, b.bound, alg_note, *gt.bound, l.ref, l.run));
    } else if (!loss_abs && !gt.loss_rel) {
      loss_abs = legacy_loss_abs(it.dtype);
      const std::string note =
          "the reference set has no error-bound scales (made before validate stored them): bfloat16 and float16 "
          "losses are gated by the fixed loss_abs of docs/compare.md (\"Sets without scales\"); regenerate it for "
          "the derived loss bound";
      if (std::find(report_.warnings.begin(), report_.warnings.end(), note) == report_.warnings.end())
        report_.warnings.push_back(note);
    }
  }
  // A fixed loss_abs / loss_rel is never tighter than the reference's own roundings (the loss
  // floor, docs/compare.md): below it the gate would fail a run for the reference's rounding. The
  // fixed loss_abs of a set without scales stays as measured.
  // With an oracle the reference's own error is measured, |L_ref - L_exact| (its outputs'
  // accumulation carried into the loss included), and is added to the floor.
  std::optional<double> oracle_loss;
  if (oracle_) {
    auto om = open_oracle(it, e);
    if (!om) return invalid(e, om.message());
    if (*om) oracle_loss = scalar_value((*om)->view());
  }
  const bool legacy = loss_abs && !gt.loss_abs;
  LossFloor floor;
  if (finite && !legacy && (loss_abs || gt.loss_rel)) {
    auto f = reference_loss_floor(it, l.ref, alg);
    if (!f) return invalid(e, f.message());
    floor = *f;
    if (oracle_loss && std::isfinite(*oracle_loss)) floor.floor += std::fabs(l.ref - *oracle_loss);
  }
  if (loss_abs && finite) {
    const double limit = std::max(*loss_abs, floor.floor) + floor.algorithm;
    if (!check("loss_abs", l.abs_diff, limit, true))
      why.push_back(fmt::format("loss differs by {:.3g} (> {:.3g} absolute{}{}): ref {:.9g}, run {:.9g}", l.abs_diff,
                                limit, floor.floor > *loss_abs ? ", the reference's own rounding" : "",
                                floor.algorithm > 0 ? " + the output's " + e.algorithm + " error" : "", l.ref, l.run));
  }
  if (gt.loss_rel && finite) {
    auto rel = [&](double v) { return l.ref != 0 ? v / std::fabs(l.ref) : 0.0; };
    const double limit = std::max(*gt.loss_rel, rel(floor.floor)) + rel(floor.algorithm);
    if (!check("loss_rel", l.rel_diff, limit, true))
      why.push_back(fmt::format("loss differs by {:.3g} relative (> {:.3g}{}{}): ref {:.9g}, run {:.9g}", l.rel_diff,
                                limit, rel(floor.floor) > *gt.loss_rel ? ", the reference's own rounding" : "",
                                floor.algorithm > 0 ? " + the output's " + e.algorithm + " error" : "", l.ref, l.run));
  }
  // The loss of the output as stored, not of the unrounded one (diagnosis_loss_check.hpp).
  if (finite)
    if (auto c = loss_rounding_check(it, l))
      if (!check("loss_on_stored_output", c->ratio, LossRoundingCheck::kLimit, false))
        why.push_back(c->message);
  if (!why.empty()) {
    e.verdict = Verdict::failed;
    std::string msg;
    for (const auto& w : why) msg += (msg.empty() ? "" : "; ") + w;
    e.message = msg;
    if (opt_.diagnose && finite) e.diagnosis = loss_diagnosis(it, e, ref, run, gt, l);
  } else {
    e.verdict = Verdict::passed;
  }
  if (oracle_loss) {
    const double ov = *oracle_loss;
    OracleComparison oc;
    oc.ref_max_abs = std::fabs(l.ref - ov);
    oc.run_max_abs = std::fabs(l.run - ov);
    oc.ref_max_ulp = ulp_distance(static_cast<float>(ov), static_cast<float>(l.ref), DType::float32);
    oc.run_max_ulp = ulp_distance(static_cast<float>(ov), static_cast<float>(l.run), DType::float32);
    oc.closer = closer(oc);
    e.oracle = oc;
  }
}

std::optional<LossRoundingCheck> Comparer::loss_rounding_check(const PairItem& it,
                                                               const LossStats& l) {
  if (it.ref->c.dtype == DType::float32 || !it.run) return std::nullopt;
  const cases::OpRunRecord* o = it.run->op(*it.op);
  if (!o || std::find(o->produced.begin(), o->produced.end(), "output") == o->produced.end())
    return std::nullopt;
  auto out = open_npy(
      (stdfs::path(it.run_file).parent_path() / it.ref->c.file_name(*it.op, "output")).string());
  if (!out) return std::nullopt;
  DiagnosisInput in;
  in.op = *it.op;
  in.role = ops::Role::loss;
  in.logical = it.ref->c.dtype;
  in.ref_loss = l.ref;
  in.run_loss = l.run;
  std::vector<Mapped> keep;
  add_reference_tensors(it, in, keep);
  return check_loss_rounding(in, out->view());
}

namespace {
// The op's output entry, evaluated just before its loss (pair_run's order), failed its gate.
bool output_failed(const std::vector<Entry>& done, const Entry& loss) {
  for (auto it = done.rbegin(); it != done.rend(); ++it) {
    if (it->variant != loss.variant || it->dtype != loss.dtype || it->case_name != loss.case_name ||
        it->op != loss.op)
      return false;
    if (it->tensor == "output") return it->verdict == Verdict::failed;
  }
  return false;
}
}  // namespace

Diagnosis Comparer::loss_diagnosis(const PairItem& it, const Entry& e, const Mapped& ref,
                                   const Mapped& run, const Gates& gt, const LossStats& l) {
  DiagnosisInput in;
  in.ref = ref.view();
  in.run = run.view();
  in.op = *it.op;
  in.tensor = it.tensor;
  in.role = e.role;
  in.logical = it.ref->c.dtype;
  in.ref_loss = l.ref;
  in.run_loss = l.run;
  in.loss_abs = gt.loss_abs;
  in.loss_rel = gt.loss_rel;
  in.output_failed = output_failed(report_.entries, e);
  declared_layouts(it, in);
  std::vector<Mapped> keep;
  add_reference_tensors(it, in, keep);
  return diagnose(in);
}

}  // namespace validate::compare::detail
