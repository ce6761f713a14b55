// Markdown for a pull-request comment: the verdict first, failures with their diagnosis and repro,
// the full table folded away.
#include <algorithm>
#include <sstream>

#include "algorithm_lines.hpp"
#include "consequences.hpp"
#include "format.hpp"
#include "validate/core/fs.hpp"
#include "validate/report/reporter.hpp"

namespace validate::report {

using compare::Entry;
using compare::Verdict;

namespace {

// Text as itself in CommonMark/GFM: each character with inline meaning gets a backslash, the
// backslash first of all (a message holding "\<img …\>" became "\\<img …>", a raw tag), '&'
// (entities), '~' (strikethrough) and '|' (table cells) too.
std::string md_escape(const std::string& s) {
  std::string o;
  for (char c : detail::clean_text(s)) {
    if (c == '\\' || c == '|' || c == '*' || c == '_' || c == '`' || c == '<' || c == '>' || c == '[' ||
        c == ']' || c == '&' || c == '~')
      o += '\\';
    if (c == '\n' || c == '\r') {  // both end a line in CommonMark
      o += ' ';
      continue;
    }
    o += c;
  }
  return o;
}

// A CommonMark code span holding `s` literally (no markup, no HTML inside one): the fence is one
// backtick longer than the longest run of backticks in `s` (a fixed "``" was closed early by a
// "``" in a path), with a space inside each end when `s` holds a backtick; line endings, which
// would end the paragraph, become spaces.
std::string code(const std::string& s) {
  std::string t = detail::clean_text(s);
  std::size_t longest = 0, run = 0;
  for (char& c : t) {
    if (c == '\n' || c == '\r') c = ' ';
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  const std::string pad = longest > 0 ? " " : "";
  return fence + pad + t + pad + fence;
}

const char* mark(Verdict v) {
  switch (v) {
    case Verdict::passed:
      return "✅";
    case Verdict::failed:
    case Verdict::error:
    case Verdict::invalid:
      return "❌";
    case Verdict::mistrusted:
      return "⚠️";
    default:
      return "➖";
  }
}

void table(std::ostringstream& o, const std::vector<const Entry*>& rows, bool oracle) {
  o << "| | dtype | case | op | tensor | max ULP | max abs | "
    << (oracle ? "closer to oracle | " : "") << "verdict |\n";
  o << "|---|---|---|---|---|---:|---:|" << (oracle ? "---|" : "") << "---|\n";
  for (const Entry* e : rows) {
    o << "| " << mark(e->verdict) << " | " << e->dtype
      << (e->variant.empty() ? "" : " [" + md_escape(e->variant) + "]") << " | "
      << md_escape(e->case_name) << " | " << e->op_name() << " | " << md_escape(detail::tensor_label(*e))
      << " | " << detail::cell_ulp(*e) << " | " << detail::cell_abs(*e) << " | "
      << (oracle ? (e->oracle ? e->oracle->closer : "-") + std::string(" | ") : "")
      << compare::verdict_name(e->verdict) << " |\n";
  }
}

}  // namespace

std::string render_markdown(const compare::Report& r) {
  std::ostringstream o;
  const int code_ = r.exit_code();
  o << "### " << (code_ == 0 ? "✅ " : "❌ ") << r.summary_line() << "\n\n";
  o << "Reference " << code(r.ref_dir) << " · run " << code(r.run_dir);
  if (!r.oracle_dir.empty()) o << " · oracle " << code(r.oracle_dir);
  const std::string desc = detail::run_description(r);
  if (!desc.empty()) o << " (" << md_escape(desc) << ")";
  o << "\n\n";
  if (!r.self_check.empty()) o << "> **Self-check:** " << md_escape(r.self_check) << "\n\n";
  for (const auto& w : r.warnings) o << "> **Warning:** " << md_escape(w) << "\n\n";

  // The named mistakes first; the failures that follow from them are folded below the others.
  const auto causes = detail::root_causes(r);
  if (!causes.empty()) {
    o << "#### What went wrong\n\n";
    for (const auto& c : causes) o << "- ❌ " << md_escape(detail::root_cause_line(c)) << " `" << c.h->code << "`\n";
    o << "\n";
  }
  std::vector<const Entry*> bad, follows, all;
  for (const auto& e : r.entries) {
    all.push_back(&e);
    if (detail::is_consequence(e))
      follows.push_back(&e);
    else if (detail::shows_details(e) || e.verdict == Verdict::mistrusted)
      bad.push_back(&e);
  }
  auto detail_lines = [&](const std::vector<const Entry*>& rows) {
    for (const Entry* e : rows) {
      o << "- " << mark(e->verdict) << " **"
        << md_escape((e->variant.empty() ? "" : "[" + e->variant + "] ") + e->id()) << "** ("
        << compare::verdict_name(e->verdict) << "): " << md_escape(e->message) << "\n";
      if (e->diagnosis && !e->diagnosis->summary.empty())
        o << "  - **Diagnosis:** " << md_escape(e->diagnosis->summary)
          << (e->diagnosis->named() ? " `" + e->diagnosis->named()->code + "`" : std::string())
          << "\n";
      if (e->oracle)
        o << "  - Oracle: reference " << detail::sci(e->oracle->ref_max_abs) << " / run "
          << detail::sci(e->oracle->run_max_abs) << " max abs from exact (" << e->oracle->closer
          << " closer)\n";
      if (!e->bound_model.empty()) o << "  - " << md_escape(detail::algorithm_line(*e)) << "\n";
      if (!e->repro.empty()) o << "  - Repro: " << code(e->repro) << "\n";
    }
  };
  if (const auto lines = detail::algorithm_lines(r); !lines.empty()) {
    o << "#### Algorithms\n\nTensors the run computed by another algorithm than the direct sum, and the error-bound "
         "model each was judged by (every other tensor: direct).\n\n";
    for (const auto& l : lines) o << "- " << md_escape(l) << "\n";
    o << "\n";
  }
  if (!bad.empty() || !follows.empty()) {
    o << "#### Needs attention\n\n";
    detail_lines(bad);
    if (!follows.empty()) {
      o << "\n<details><summary>" << md_escape(detail::consequences_phrase(detail::consequence_counts(r)))
        << "</summary>\n\n";
      detail_lines(follows);
      o << "\n</details>\n";
    }
    o << "\n";
  }
  const auto trajectories = detail::trajectories(r);
  if (!trajectories.empty()) {
    o << "#### Training trajectories\n\n";
    for (const Entry* e : trajectories) {
      const auto& t = *e->trajectory;
      const bool bad = t.first_bad_step >= 0 || t.checkpoints_failed > 0 || compare::is_failure(e->verdict);
      o << "- " << (bad ? "❌" : "✅") << " **"
        << md_escape((e->variant.empty() ? "" : "[" + e->variant + "] ") + e->dtype + "/" + e->case_name + "/" + e->op_name())
        << "**: " << md_escape(detail::trajectory_headline(*e)) << "\n";
      const std::string ck = detail::trajectory_checkpoint_line(t);
      if (!ck.empty()) o << "  - " << md_escape(ck) << "\n";
    }
    o << "\n";
  }
  o << "<details><summary>All " << all.size() << " entries</summary>\n\n";
  table(o, all, !r.oracle_dir.empty());
  o << "\n</details>\n";
  return o.str();
}

namespace {
class MarkdownReporter : public Reporter {
 public:
  explicit MarkdownReporter(std::string path) : path_(std::move(path)) {}
  std::string name() const override { return "markdown"; }
  Status report(const compare::Report& r) override {
    return fs::write_report(path_, render_markdown(r));
  }

 private:
  std::string path_;
};
}  // namespace

std::unique_ptr<Reporter> make_markdown_reporter(std::string path) {
  return std::make_unique<MarkdownReporter>(std::move(path));
}

}  // namespace validate::report
