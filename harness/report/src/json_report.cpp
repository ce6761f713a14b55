// The machine-readable report: every metric of every entry, "schema_version": 1. Non-finite numbers
// (a NaN loss, an infinite relative error) are written as null, since JSON has no NaN.
#include <cmath>

#include "format.hpp"
#include "validate/metrics/ulp_histogram.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/json_io.hpp"
#include "validate/report/reporter.hpp"

namespace validate::report {

using nlohmann::json;

namespace {

json num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
json opt_num(const std::optional<double>& v) { return v ? num(*v) : json(nullptr); }

json ulp_json(const compare::UlpSummary& u) {
  return {{"count", u.count}, {"max", u.max},   {"mean", num(u.mean)},     {"p50", u.p50},
          {"p99", u.p99},     {"p999", u.p999}, {"histogram", u.histogram}};
}

json element_json(const compare::Element& el, const compare::Entry& e) {
  if (el.index < 0) return nullptr;
  return {{"index", el.index},
          {"coords", compare::format_coords(el.index, e.shape, e.axes)},
          {"ref", num(el.ref)},
          {"run", num(el.run)},
          {"abs_error", num(el.abs_error)},
          {"ulp", el.ulp}};
}

json hypothesis_json(const compare::Hypothesis& h) {
  return {{"code", h.code},     {"tensor", h.tensor},
          {"side", h.side},     {"family", h.family},
          {"params", h.params}, {"spec", h.spec},
          {"description", h.description},
          {"cause", h.cause},   {"fix", h.fix},
          {"max_abs", num(h.max_abs)},
          {"beyond", h.beyond}, {"checked", h.checked},
          {"passes", h.passes}, {"confirmed_all", h.confirmed_all}};
}

json entry_json(const compare::Entry& e) {
  json j = {{"id", e.id()},
            {"variant", e.variant},
            {"dtype", e.dtype},
            {"case", e.case_name},
            {"op", e.op_name()},
            {"tensor", e.tensor},
            {"role", e.role_name()},
            {"axes", e.axes},
            {"shape", e.shape},
            {"K", e.K},
            {"verdict", compare::verdict_name(e.verdict)},
            {"failed", compare::is_failure(e.verdict)},
            {"message", e.message},
            {"repro", e.repro}};
  // The algorithm that computed the tensor and the bound model it was judged by (docs/compare.md,
  // "Algorithm-aware bounds"); only where an error bound was checked.
  if (!e.bound_model.empty()) j["algorithm"] = e.algorithm, j["bound_model"] = e.bound_model;
  if (e.gates) {
    const auto& g = *e.gates;
    j["gates"] = {{"max_ulp", opt_num(g.max_ulp)},   {"atol", opt_num(g.atol)},
                  {"rtol", opt_num(g.rtol)},         {"min_pcc", opt_num(g.min_pcc)},
                  {"loss_abs", opt_num(g.loss_abs)}, {"loss_rel", opt_num(g.loss_rel)},
                  {"near_zero", num(g.near_zero)},   {"mistrust_zeros", num(g.mistrust_zeros)}};
  }
  json checks = json::array();
  for (const auto& c : e.checks)
    checks.push_back({{"name", c.name},
                      {"value", num(c.value)},
                      {"limit", num(c.limit)},
                      {"op", c.upper ? "<=" : ">="},
                      {"passed", c.passed}});
  j["checks"] = checks;
  if (e.stats) {
    const auto& s = *e.stats;
    j["metrics"] = {{"numel", s.numel},
                    {"compared", s.compared},
                    {"ref_max_abs", num(s.ref_max_abs)},
                    {"near_zero_floor", num(s.near_zero_floor)},
                    {"ref_zeros", s.ref_zeros},
                    {"ref_zero_fraction", num(s.ref_zero_fraction())},
                    {"max_abs", num(s.max_abs)},
                    {"mean_abs", num(s.mean_abs)},
                    {"max_rel", num(s.max_rel)},
                    {"mean_rel", num(s.mean_rel)},
                    {"pcc", num(s.pcc)},
                    {"beyond_tolerance", s.beyond_tolerance},
                    {"first_beyond", s.first_beyond},
                    {"min_atol", num(s.min_atol)},
                    {"min_rtol", num(s.min_rtol)},
                    {"ulp", ulp_json(s.ulp)},
                    {"ulp_near_zero", ulp_json(s.ulp_near_zero)},
                    {"nonfinite",
                     {{"nan_ref", s.nonfinite.nan_ref},
                      {"nan_run", s.nonfinite.nan_run},
                      {"inf_ref", s.nonfinite.inf_ref},
                      {"inf_run", s.nonfinite.inf_run},
                      {"nan_mismatch", s.nonfinite.nan_mismatch},
                      {"inf_mismatch", s.nonfinite.inf_mismatch},
                      {"first_mismatch", s.nonfinite.first_mismatch}}},
                    {"worst_abs", element_json(s.worst_abs, e)},
                    {"worst_ulp", element_json(s.worst_ulp, e)}};
  }
  if (e.loss)
    j["loss"] = {{"ref", num(e.loss->ref)},
                 {"run", num(e.loss->run)},
                 {"abs_diff", num(e.loss->abs_diff)},
                 {"rel_diff", num(e.loss->rel_diff)},
                 {"ulp", e.loss->ulp}};
  if (e.diagnosis) {
    json m = json::array();
    for (const auto& h : e.diagnosis->matches) m.push_back(hypothesis_json(h));
    // code/tensor/side/params/residual: the mistake named, or code "none" with the
    // families tried and the best residual when nothing fits.
    const compare::Hypothesis* named = e.diagnosis->named();
    const compare::Hypothesis* best = named ? named : e.diagnosis->closest ? &*e.diagnosis->closest : nullptr;
    json params = named ? named->params : json::object();
    if (!named) params["families"] = e.diagnosis->families;
    j["diagnosis"] = {
        {"code", named ? named->code : "none"},
        {"tensor", named ? named->tensor : e.tensor},
        {"side", named ? named->side : ""},
        {"params", params},
        // A mistake attributed from the output (follows_from) was not recomputed here: no residual.
        {"residual", best && !best->params.contains("follows_from") ? num(best->max_abs) : json(nullptr)},
        {"ambiguous", e.diagnosis->ambiguous},
        {"summary", e.diagnosis->summary},
        {"found", !e.diagnosis->matches.empty()},
        {"tried", e.diagnosis->tried},
        {"baseline_max_abs", num(e.diagnosis->baseline_max_abs)},
        {"matches", m},
        {"closest", e.diagnosis->closest ? hypothesis_json(*e.diagnosis->closest) : json(nullptr)}};
    // A failure nothing explains: the statistics over the tensor (and across the set, "k_trend").
    if (!e.diagnosis->profile.empty()) j["diagnosis"]["profile"] = e.diagnosis->profile;
  }
  if (e.trajectory) {
    const auto& t = *e.trajectory;
    auto arr = [](const std::vector<double>& v) {
      json a = json::array();
      for (double x : v) a.push_back(num(x));
      return a;
    };
    j["trajectory"] = {{"steps", t.steps},
                       {"r0", num(t.r0)},
                       {"kind", t.kind},
                       {"first_bad_step", t.first_bad_step},
                       {"error", num(t.error)},
                       {"gate", num(t.gate_at)},
                       {"growth", num(t.growth)},
                       {"worst_over_gate", num(detail::worst_over_gate(t))},
                       {"sentence", t.sentence},
                       {"first_bad_checkpoint", t.first_bad_checkpoint.empty() ? json(nullptr) : json(t.first_bad_checkpoint)},
                       {"first_bad_checkpoint_step", t.first_bad_checkpoint_step},
                       {"checkpoint_diagnosis", t.checkpoint_diagnosis},
                       {"checkpoint_diagnosis_code", t.checkpoint_diagnosis_code},
                       {"checkpoints_compared", t.checkpoints_compared},
                       {"checkpoints_failed", t.checkpoints_failed},
                       {"ref", arr(t.ref)},
                       {"run", arr(t.run)},
                       {"rel_error", arr(t.rel_error)},
                       {"gate_per_step", arr(t.gate)}};
  }
  if (e.oracle)
    j["oracle"] = {{"ref_max_abs", num(e.oracle->ref_max_abs)},
                   {"run_max_abs", num(e.oracle->run_max_abs)},
                   {"ref_max_ulp", e.oracle->ref_max_ulp},
                   {"run_max_ulp", e.oracle->run_max_ulp},
                   {"closer", e.oracle->closer}};
  return j;
}

// One line per op that trained: its trajectory verdict (the full curves are on its entry).
json trajectories_json(const compare::Report& r) {
  json out = json::array();
  for (const compare::Entry* e : detail::trajectories(r)) {
    const auto& t = *e->trajectory;
    out.push_back({{"id", e->dtype + "/" + e->case_name + "/" + e->op_name()},
                   {"variant", e->variant},
                   {"entry", e->id()},
                   {"verdict", compare::verdict_name(e->verdict)},
                   {"failed", compare::is_failure(e->verdict) || t.checkpoints_failed > 0},
                   {"kind", t.kind},
                   {"first_bad_step", t.first_bad_step},
                   {"growth", num(t.growth)},
                   {"sentence", t.sentence},
                   {"first_bad_checkpoint", t.first_bad_checkpoint.empty() ? json(nullptr) : json(t.first_bad_checkpoint)},
                   {"checkpoint_diagnosis_code", t.checkpoint_diagnosis_code},
                   {"headline", detail::trajectory_headline(*e)}});
  }
  return out;
}

}  // namespace

json render_json(const compare::Report& r) {
  const auto c = r.counts();
  json labels = json::array();
  for (int b = 0; b < compare::UlpHistogram::kCoarseBins; ++b)
    labels.push_back(compare::UlpHistogram::coarse_label(b));
  json entries = json::array();
  for (const auto& e : r.entries) entries.push_back(entry_json(e));
  return {{"schema_version", kJsonSchemaVersion},
          {"tool", "validate compare"},
          {"harness", {{"version", r.harness_version}, {"git_commit", r.git_commit}}},
          {"created_at", r.created_at},
          {"reference", r.ref_dir},
          {"run", r.run_dir},
          {"oracle", r.oracle_dir.empty() ? json(nullptr) : json(r.oracle_dir)},
          {"variants", r.variants},
          {"run_info", r.run_info},
          {"policy", r.policy},
          {"kernel_isa", r.kernel_isa},
          {"elapsed_s", num(r.elapsed_s)},
          {"ulp_histogram_bins", labels},
          {"summary",
           {{"passed", c.passed},
            {"failed", c.failed + c.error},
            {"runner_errors", c.error},
            {"mistrusted", c.mistrusted},
            {"not_run", c.not_run},
            {"not_requested", c.not_requested},
            {"skipped", c.skipped},
            {"unsupported", c.unsupported},
            {"invalid", c.invalid},
            {"exit_code", r.exit_code()},
            {"line", r.summary_line()}}},
          {"trajectories", trajectories_json(r)},
          {"self_check", r.self_check.empty() ? json(nullptr) : json(r.self_check)},
          {"warnings", r.warnings},
          {"input_errors", r.input_errors},
          {"entries", entries}};
}

namespace {
class JsonReporter : public Reporter {
 public:
  explicit JsonReporter(std::string path) : path_(std::move(path)) {}
  std::string name() const override { return "json"; }
  Status report(const compare::Report& r) override {
    return fs::write_report(
        path_, json_text(render_json(r), 2) + "\n");
  }

 private:
  std::string path_;
};
}  // namespace

std::unique_ptr<Reporter> make_json_reporter(std::string path) {
  return std::make_unique<JsonReporter>(std::move(path));
}

}  // namespace validate::report
