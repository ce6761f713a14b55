// A self-contained HTML page: summary, what needs attention (with diagnosis and repro), error
// versus K, ULP histograms, and every tensor in a table. Plots are inline SVG; styles are inline;
// there is no script and nothing is fetched, so the file can be archived as a CI artifact and
// opened offline.
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "consequences.hpp"
#include "format.hpp"
#include "svg.hpp"
#include "validate/metrics/ulp_histogram.hpp"
#include "validate/core/fs.hpp"
#include "validate/report/reporter.hpp"

namespace validate::report {

using compare::Entry;
using compare::Verdict;
using svg::escape;

namespace {

constexpr const char* kStyle = R"(
:root{--ok:#1a7f37;--bad:#cf222e;--warn:#9a6700;--mute:#6e7781;--bg:#ffffff;--panel:#f6f8fa;--line:#d0d7de}
*{box-sizing:border-box}body{font:14px/1.45 -apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:0;background:var(--bg);color:#1f2328}
header,main{max-width:1200px;margin:0 auto;padding:16px 24px}header{border-bottom:1px solid var(--line)}
h1{font-size:22px;margin:0 0 6px}h2{font-size:18px;margin:28px 0 10px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}.summary{font-size:17px;font-weight:600;margin:6px 0}.summary.ok{color:var(--ok)}.summary.bad{color:var(--bad)}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:8px 0;color:var(--mute)}dl.meta dt{font-weight:600}dl.meta dd{margin:0;font-family:ui-monospace,monospace}
.cards{display:flex;gap:10px;flex-wrap:wrap;margin:12px 0}.card{background:var(--panel);border:1px solid var(--line);border-radius:6px;padding:8px 14px;min-width:96px}
.card b{display:block;font-size:22px}.card.passed b{color:var(--ok)}.card.failed b,.card.invalid b{color:var(--bad)}.card.mistrusted b,.card.notrun b{color:var(--warn)}
article{border:1px solid var(--line);border-left:4px solid var(--bad);border-radius:6px;padding:10px 14px;margin:10px 0;background:#fff}
article.mistrusted{border-left-color:var(--warn)}article h3{margin:0 0 4px;font-family:ui-monospace,monospace}
.diag{background:#ddf4ff;border-radius:4px;padding:6px 10px;margin:6px 0}.repro{font-family:ui-monospace,monospace;background:var(--panel);padding:4px 8px;border-radius:4px;display:block;overflow-x:auto;white-space:pre}
table{border-collapse:collapse;width:100%;margin:6px 0 16px;font-size:13px}th,td{border-bottom:1px solid var(--line);padding:3px 8px;text-align:left;white-space:nowrap}
th{background:var(--panel);position:sticky;top:0}td.num{text-align:right;font-family:ui-monospace,monospace}
.v-passed{color:var(--ok);font-weight:600}.v-failed,.v-error,.v-invalid{color:var(--bad);font-weight:700}.v-mistrusted,.v-not-run,.v-skipped,.v-unsupported{color:var(--warn)}
.v-not-requested,.card.notrequested b{color:var(--mute)}.diag code{font-size:12px}
.plots{display:flex;flex-wrap:wrap;gap:14px}.plots svg{background:#fff;border:1px solid var(--line);border-radius:6px}
svg .ct{font-size:13px;font-weight:600;fill:#1f2328}svg .tick{font-size:10px;fill:#57606a}svg .axis{font-size:11px;fill:#1f2328}
.selfcheck{background:#ddf4ff;border:1px solid #54aeff;border-radius:6px;padding:8px 12px;margin:10px 0}
svg .grid{stroke:#eaeef2;stroke-width:1}svg .frame{fill:none;stroke:#d0d7de}footer{color:var(--mute);font-size:12px;margin:30px 0}
)";

std::string vclass(Verdict v) {
  std::string s = compare::verdict_name(v);
  for (auto& c : s)
    if (c == ' ') c = '-';
  return "v-" + s;
}

std::string ulp_hist_svg(const Entry& e) {
  svg::Bars b;
  b.title = "ULP distance histogram: " + e.id();
  b.x_label = "ULP distance (" + e.dtype + ")";
  const auto& reg = e.stats->ulp.histogram;
  const auto& nz = e.stats->ulp_near_zero.histogram;
  const std::size_t n = std::max(reg.size(), nz.size());
  for (std::size_t i = 0; i < n; ++i)
    b.labels.push_back(compare::UlpHistogram::coarse_label(static_cast<int>(i)));
  b.series_names = {"regular", "near-zero"};
  b.series = {reg, nz};
  b.width = std::max(560, 80 + 24 * static_cast<int>(n));
  return svg::bars(b);
}

}  // namespace

namespace {

void html_header(std::ostream& o, const compare::Report& r) {
  const int code = r.exit_code();
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    << "<title>" << escape(r.summary_line()) << "</title><style>" << kStyle
    << "</style></head><body>\n";
  o << "<header><h1>validate compare</h1><p class=\"summary " << (code == 0 ? "ok" : "bad") << "\">"
    << escape(r.summary_line()) << " — exit code " << code
    << "</p><dl class=\"meta\"><dt>reference</dt><dd>" << escape(r.ref_dir)
    << "</dd><dt>run</dt><dd>" << escape(r.run_dir) << "</dd>";
  if (!r.oracle_dir.empty()) o << "<dt>oracle</dt><dd>" << escape(r.oracle_dir) << "</dd>";
  const std::string desc = detail::run_description(r);
  if (!desc.empty()) o << "<dt>run info</dt><dd>" << escape(desc) << "</dd>";
  if (!r.variants.empty() && !(r.variants.size() == 1 && r.variants[0].empty())) {
    std::string v;
    for (const auto& x : r.variants)
      v += (v.empty() ? "" : ", ") + (x.empty() ? std::string("(top level)") : x);
    o << "<dt>variants</dt><dd>" << escape(v) << "</dd>";
  }
  o << "<dt>created</dt><dd>" << escape(r.created_at) << "</dd><dt>harness</dt><dd>"
    << escape(r.harness_version) << " (" << escape(r.git_commit) << "), kernel "
    << escape(r.kernel_isa) << ", " << fmt::format("{:.2f}", r.elapsed_s)
    << " s</dd></dl></header>\n<main>\n";
  if (!r.self_check.empty())
    o << "<p class=\"selfcheck\" id=\"self-check\"><b>Self-check.</b> " << escape(r.self_check)
      << "</p>\n";
  for (const auto& w : r.warnings)
    o << "<p class=\"v-mistrusted\">Warning: " << escape(w) << "</p>\n";
}

void html_cards(std::ostream& o, const compare::Report& r) {
  const auto c = r.counts();
  o << "<div class=\"cards\">";
  auto card = [&](const char* cls, const char* label, std::int64_t n) {
    o << "<div class=\"card " << cls << "\"><b>" << n << "</b>" << label << "</div>";
  };
  card("passed", "passed", c.passed);
  card("failed", "failed", c.failed + c.error);
  card("notrun", "not run", c.not_run);
  // results the run did not ask for (a forward-only program) are neutral, not amber.
  if (c.not_requested) card("notrequested", "not requested", c.not_requested);
  if (c.mistrusted) card("mistrusted", "mistrusted", c.mistrusted);
  if (c.skipped + c.unsupported) card("notrun", "skipped / unsupported", c.skipped + c.unsupported);
  if (c.invalid) card("invalid", "invalid inputs", c.invalid);
  o << "</div>\n";
}

// The named mistakes, before everything they explain.
void html_root_causes(std::ostream& o, const compare::Report& r) {
  const auto causes = detail::root_causes(r);
  if (causes.empty()) return;
  o << "<h2 id=\"what-went-wrong\">What went wrong</h2>\n<ul>\n";
  for (const auto& c : causes)
    o << "<li class=\"v-failed\">" << escape(detail::root_cause_line(c)) << " <code>" << escape(c.h->code)
      << "</code></li>\n";
  const std::size_t n = detail::consequence_counts(r).after_named;
  if (n > 0) o << "<li>" << n << " more failure" << (n == 1 ? "" : "s") << " follow from them (below)</li>\n";
  o << "</ul>\n";
}

// One training op: its verdict, both loss curves, and their relative difference per step under
// the gate r0 * sqrt(1 + step).
void html_trajectory(std::ostream& o, const Entry& entry) {
  const Entry* e = &entry;
  const auto& t = *e->trajectory;
  const bool bad = t.first_bad_step >= 0 || t.checkpoints_failed > 0 || compare::is_failure(e->verdict);
  const std::string label = (e->variant.empty() ? "" : "[" + e->variant + "] ") + e->dtype + "/" + e->case_name + "/" + e->op_name();
  o << "<article class=\"trajectory " << (bad ? "failed" : "passed") << "\"" << (bad ? "" : " style=\"border-left-color:var(--ok)\"")
    << "><h3>" << escape(label) << " <span class=\"" << vclass(bad ? Verdict::failed : Verdict::passed) << "\">"
    << (bad ? "failed" : "passed") << "</span></h3><p>" << escape(detail::trajectory_headline(*e)) << "</p>";
  const std::string ck = detail::trajectory_checkpoint_line(t);
  if (!ck.empty())
    o << "<div class=\"diag\"><b>At the first bad checkpoint:</b> " << escape(ck) << "</div>";
  svg::LinePlot curves, diff;
  curves.title = "loss per step (reference and run)";  // the article's heading names the op
  curves.width = diff.width = 535;  // two side by side in the article
  curves.x_label = diff.x_label = "step";
  curves.y_label = "loss";
  bool positive = true;
  for (double v : t.ref) positive = positive && v > 0;
  for (double v : t.run) positive = positive && (v > 0 || !std::isfinite(v));
  curves.log_y = positive;
  svg::Series ref_s{"reference", {}, 0}, run_s{"run", {}, 1};
  for (std::size_t i = 0; i < t.ref.size(); ++i) ref_s.points.emplace_back(static_cast<double>(i), t.ref[i]);
  for (std::size_t i = 0; i < t.run.size(); ++i) run_s.points.emplace_back(static_cast<double>(i), t.run[i]);
  curves.series = {ref_s, run_s};
  diff.title = "|run − ref| / |ref| per step, and the gate";
  diff.y_label = "relative loss difference";
  svg::Series err_s{"relative difference", {}, 1}, gate_s{"gate r0·sqrt(1+step)", {}, 4};
  for (std::size_t i = 0; i < t.rel_error.size(); ++i) err_s.points.emplace_back(static_cast<double>(i), t.rel_error[i]);
  for (std::size_t i = 0; i < t.gate.size(); ++i) gate_s.points.emplace_back(static_cast<double>(i), t.gate[i]);
  diff.series = {err_s, gate_s};
  if (t.first_bad_step >= 0) {
    curves.marker_x = diff.marker_x = static_cast<double>(t.first_bad_step);
    curves.marker_label = diff.marker_label = fmt::format("first bad step {}", t.first_bad_step);
  }
  o << "<div class=\"plots\">" << svg::line_plot(curves) << svg::line_plot(diff) << "</div>";
  if (!e->repro.empty()) o << "<code class=\"repro\">" << escape(e->repro) << "</code>";
  o << "</article>\n";
}

void html_trajectories(std::ostream& o, const compare::Report& r) {
  const auto trajectories = detail::trajectories(r);
  if (!trajectories.empty())
    o << "<h2 id=\"trajectories\">Training trajectories</h2>\n<p>Each training case's loss curve is "
         "compared step by step against a gate that grows as r0&#183;sqrt(1 + step) (docs/training.md): "
         "float32 reordering drift grows slowly, a wrong update parts at once. A curve that parts is "
         "called a <i>mistake</i> when its error is at least 100&#215; the gate or grows geometrically, "
         "<i>drift</i> otherwise.</p>\n";
  for (const Entry* e : trajectories) html_trajectory(o, *e);
}

void html_attention_article(std::ostream& o, const Entry& e) {
  o << "<article class=\"" << (e.verdict == Verdict::mistrusted ? "mistrusted" : "failed")
    << "\"><h3>" << escape((e.variant.empty() ? "" : "[" + e.variant + "] ") + e.id())
    << " <span class=\"" << vclass(e.verdict) << "\">" << compare::verdict_name(e.verdict)
    << "</span></h3><p>" << escape(e.message) << "</p>";
  if (e.diagnosis) {
    if (!e.diagnosis->summary.empty())
      o << "<div class=\"diag\"><b>Diagnosis:</b> " << escape(e.diagnosis->summary)
        << (e.diagnosis->named() ? " <code>" + escape(e.diagnosis->named()->code) + "</code>" : "")
        << "</div>";
    else
      o << "<p class=\"v-skipped\">Diagnosis: none of " << e.diagnosis->tried
        << " usual layout mistakes explains it.</p>";
  }
  if (e.oracle)
    o << "<p>Against the float64 oracle: reference max abs " << detail::sci(e.oracle->ref_max_abs)
      << " (" << e.oracle->ref_max_ulp << " ULP), run " << detail::sci(e.oracle->run_max_abs)
      << " (" << e.oracle->run_max_ulp << " ULP) — <b>"
      << escape(e.oracle->closer == "tie" ? "equally close"
                                          : e.oracle->closer + " is closer to exact")
      << "</b></p>";
  if (e.stats) o << "<div class=\"plots\">" << ulp_hist_svg(e) << "</div>";
  if (!e.repro.empty()) o << "<code class=\"repro\">" << escape(e.repro) << "</code>";
  o << "</article>\n";
}

void html_needs_attention(std::ostream& o, const compare::Report& r) {
  bool any = false;
  for (const auto& e : r.entries) {
    if (!(detail::shows_details(e) || e.verdict == Verdict::mistrusted)) continue;
    if (!any) o << "<h2>Needs attention</h2>\n";
    any = true;
    html_attention_article(o, e);
  }
}

// detail::groups: entries by (variant, dtype), in report order.
using Groups = std::vector<std::pair<std::pair<std::string, std::string>, std::vector<const Entry*>>>;

// Error versus K, per (variant, dtype): one series per (op, tensor). A training case's curve
// and checkpoints have their own section above (many checkpoints would bury the K plot).
void html_k_plots(std::ostream& o, const Groups& groups) {
  auto in_k_plot = [](const Entry& e) {
    return e.K > 0 && (e.stats || e.loss) && e.role != ops::Role::loss_curve && e.role != ops::Role::checkpoint;
  };
  // One style (colour, marker, dash) per series name across every plot of the report, so
  // "conv2d grad_weight" looks the same in the float32 and the bfloat16 plots.
  std::map<std::string, int> series_style;
  for (const auto& [key, entries] : groups)
    for (const Entry* e : entries)
      if (in_k_plot(*e)) series_style.emplace(e->op_name() + " " + e->tensor, 0);
  {
    int next = 0;
    for (auto& [name, style] : series_style) style = next++;
  }
  bool plots = false;
  for (const auto& [key, entries] : groups) {
    std::map<std::string, svg::Series> abs_s, ulp_s;
    for (const Entry* e : entries) {
      if (!in_k_plot(*e)) continue;
      const std::string name = e->op_name() + " " + e->tensor;
      abs_s[name].name = ulp_s[name].name = name;
      abs_s[name].style = ulp_s[name].style = series_style[name];
      abs_s[name].points.emplace_back(static_cast<double>(e->K),
                                      e->stats ? e->stats->max_abs : e->loss->abs_diff);
      ulp_s[name].points.emplace_back(
          static_cast<double>(e->K),
          static_cast<double>(e->stats ? e->stats->ulp.max : e->loss->ulp));
    }
    if (abs_s.empty()) continue;
    if (!plots)
      o << "<h2>Error versus K</h2>\n<p>K is the reduction length of each case (conv: "
           "C/groups·KH·KW; matmul: K). "
           "Each series has its own colour, marker shape and line dash (legible in greyscale); "
           "hollow markers sit on the bottom edge: zero error.</p>\n";
    plots = true;
    svg::Scatter a, u;
    a.title = "max |run − ref| versus K — " + detail::group_title(key);
    u.title = "max ULP (" + key.second + ") versus K — " + detail::group_title(key);
    a.x_label = u.x_label = "K";
    a.y_label = "max abs error";
    u.y_label = "max ULP";
    for (auto& [n, s] : abs_s) a.series.push_back(s);
    for (auto& [n, s] : ulp_s) u.series.push_back(s);
    o << "<h3>" << escape(detail::group_title(key)) << "</h3><div class=\"plots\">"
      << svg::scatter_loglog(a) << svg::scatter_loglog(u) << "</div>\n";
  }
}

// ULP distribution per group, all tensors together.
void html_ulp_histograms(std::ostream& o, const Groups& groups) {
  bool hist = false;
  for (const auto& [key, entries] : groups) {
    std::vector<std::uint64_t> reg, nz;
    for (const Entry* e : entries) {
      if (!e->stats) continue;
      auto addv = [](std::vector<std::uint64_t>& to, const std::vector<std::uint64_t>& from) {
        if (to.size() < from.size()) to.resize(from.size(), 0);
        for (std::size_t i = 0; i < from.size(); ++i) to[i] += from[i];
      };
      addv(reg, e->stats->ulp.histogram);
      addv(nz, e->stats->ulp_near_zero.histogram);
    }
    if (reg.empty() && nz.empty()) continue;
    if (!hist)
      o << "<h2>ULP distribution</h2>\n<p>Every compared element, in the logical dtype. Near-zero "
           "elements (|ref| below "
           "the near-zero floor) are counted apart.</p><div class=\"plots\">";
    hist = true;
    svg::Bars b;
    b.title = "ULP histogram — " + detail::group_title(key);
    b.x_label = "ULP distance (" + key.second + ")";
    for (std::size_t i = 0; i < std::max(reg.size(), nz.size()); ++i)
      b.labels.push_back(compare::UlpHistogram::coarse_label(static_cast<int>(i)));
    b.series_names = {"regular", "near-zero"};
    b.series = {reg, nz};
    b.width = std::max(560, 80 + 24 * static_cast<int>(b.labels.size()));
    o << svg::bars(b);
  }
  if (hist) o << "</div>\n";
}

void html_tensor_row(std::ostream& o, const Entry& entry, bool oracle) {
  const Entry* e = &entry;
  o << "<tr><td>" << escape(e->case_name) << "</td><td>" << escape(e->op_name()) << "</td><td>"
    << escape(detail::tensor_label(*e)) << "</td><td>"
    << escape(e->shape.empty() && !e->loss ? "" : shape_to_string(e->shape))
    << "</td><td class=\"num\">" << (e->K ? std::to_string(e->K) : "")
    << "</td><td class=\"num\">" << detail::cell_ulp(*e) << "</td><td class=\"num\">"
    << (e->stats ? std::to_string(e->stats->ulp.p99) : "-") << "</td><td class=\"num\">"
    << detail::cell_abs(*e) << "</td><td class=\"num\">"
    << (e->stats ? detail::sci(e->stats->mean_abs) : "-") << "</td><td class=\"num\">"
    << (e->stats  ? detail::sci(e->stats->max_rel)
        : e->loss ? detail::sci(e->loss->rel_diff)
                  : "-")
    << "</td><td class=\"num\">" << (e->stats ? fmt::format("{:.7f}", e->stats->pcc) : "-")
    << "</td><td>" << (e->stats ? svg::sparkline(e->stats->ulp.histogram) : "") << "</td>";
  if (oracle) o << "<td>" << (e->oracle ? escape(e->oracle->closer) : "-") << "</td>";
  o << "<td class=\"" << vclass(e->verdict) << "\" title=\"" << escape(e->message) << "\">"
    << compare::verdict_name(e->verdict) << "</td></tr>\n";
}

// Every entry.
void html_all_tensors(std::ostream& o, const compare::Report& r, const Groups& groups) {
  o << "<h2>All tensors</h2>\n";
  const bool oracle = !r.oracle_dir.empty();
  for (const auto& [key, entries] : groups) {
    o << "<h3>" << escape(detail::group_title(key))
      << "</h3><table><thead><tr><th>case</th><th>op</th><th>tensor</th><th>shape</th>"
      << "<th>K</th><th>max ULP</th><th>p99 ULP</th><th>max abs</th><th>mean abs</th><th>max "
         "rel</th><th>pcc</th><th>ULP histogram</th>"
      << (oracle ? "<th>closer to oracle</th>" : "") << "<th>verdict</th></tr></thead><tbody>\n";
    for (const Entry* e : entries) html_tensor_row(o, *e, oracle);
    o << "</tbody></table>\n";
  }
}

}  // namespace

std::string render_html(const compare::Report& r) {
  std::ostringstream o;
  html_header(o, r);
  html_cards(o, r);
  html_root_causes(o, r);
  html_trajectories(o, r);
  html_needs_attention(o, r);
  const auto groups = detail::groups(r);
  html_k_plots(o, groups);
  html_ulp_histograms(o, groups);
  html_all_tensors(o, r, groups);
  o << "<footer>Generated by validate compare (report schema " << kJsonSchemaVersion
    << "). Self-contained: no scripts, no external resources.</footer>\n</main></body></html>\n";
  return o.str();
}

namespace {
class HtmlReporter : public Reporter {
 public:
  explicit HtmlReporter(std::string path) : path_(std::move(path)) {}
  std::string name() const override { return "html"; }
  Status report(const compare::Report& r) override {
    return fs::write_report(path_, render_html(r));
  }

 private:
  std::string path_;
};
}  // namespace

std::unique_ptr<Reporter> make_html_reporter(std::string path) {
  return std::make_unique<HtmlReporter>(std::move(path));
}

}  // namespace validate::report
