// The terminal reporter: a compact table per dtype, details for what failed, the summary line last.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ostream>

#include "algorithm_lines.hpp"
#include "consequences.hpp"
#include "format.hpp"
#include "validate/report/reporter.hpp"

namespace validate::report {

using compare::Entry;
using compare::Verdict;

namespace {

const char* colour_of(Verdict v) {
  switch (v) {
    case Verdict::passed:
      return "\033[32m";
    case Verdict::failed:
    case Verdict::error:
      return "\033[1;31m";
    case Verdict::invalid:
      return "\033[1;35m";
    case Verdict::not_requested:
      return "\033[2m";
    default:
      return "\033[33m";
  }
}

class Painter {
 public:
  explicit Painter(bool on) : on_(on) {}
  std::string operator()(const std::string& s, const char* code) const {
    return on_ ? code + s + "\033[0m" : s;
  }
  std::string bold(const std::string& s) const { return (*this)(s, "\033[1m"); }
  std::string dim(const std::string& s) const { return (*this)(s, "\033[2m"); }

 private:
  bool on_;
};

std::string pad(const std::string& s, std::size_t w, bool right = false) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

}  // namespace

bool wants_color(int fd) {
  const char* no = std::getenv("NO_COLOR");
  if (no && *no) return false;
  return ::isatty(fd) == 1;
}

void render_terminal(std::ostream& out, const compare::Report& r, TerminalOptions opt) {
  const Painter p(opt.color);
  std::string head = "validate compare  ref " + r.ref_dir + "  run " + r.run_dir;
  if (!r.oracle_dir.empty()) head += "  oracle " + r.oracle_dir;
  const std::string desc = detail::run_description(r);
  if (!desc.empty()) head += "  (" + desc + ")";
  out << p.bold(head) << "\n";
  if (!r.self_check.empty()) out << p("SELF-CHECK: ", "\033[1;36m") << r.self_check << "\n";
  for (const auto& w : r.warnings) out << p("warning: ", "\033[33m") << w << "\n";
  // The named mistakes first (and again last): what a user fixes, before the tables and the
  // failures that follow from them.
  const auto causes = detail::root_causes(r);
  const std::size_t folded = opt.verbose ? 0 : detail::consequence_count(r);
  auto what_went_wrong = [&] {
    if (causes.empty()) return;
    out << "\n" << p.bold(fmt::format("what went wrong ({} named mistake{})", causes.size(), causes.size() == 1 ? "" : "s"))
        << "\n";
    for (const auto& c : causes) out << "  " << p("- ", colour_of(Verdict::failed)) << detail::root_cause_line(c) << "\n";
    const std::size_t n = detail::consequence_counts(r).after_named;
    if (n > 0)
      out << "  " << p.dim(fmt::format("{} more failure{} follow{} from {}{}", n, n == 1 ? "" : "s", n == 1 ? "s" : "",
                                       causes.size() == 1 ? "it" : "them", opt.verbose ? "" : " (--verbose details them)"))
          << "\n";
  };
  what_went_wrong();

  const bool oracle = !r.oracle_dir.empty();
  for (const auto& [key, entries] : detail::groups(r)) {
    std::size_t wc = 4, wt = 6, wo = 6;  // "conv2d" and "matmul" are 6; a longer op name widens it
    for (const Entry* e : entries) {
      wc = std::max(wc, e->case_name.size());
      wo = std::max(wo, e->op_name().size());
      wt = std::max(wt, detail::tensor_label(*e).size());
    }
    out << "\n" << p.bold(detail::group_title(key)) << "\n";
    std::string hdr = "  " + pad("case", wc) + "  " + pad("op", wo) + "  " + pad("tensor", wt) +
                      "  " + pad("max ULP", 10, true) + "  " + pad("max abs", 9, true) + "  " +
                      (oracle ? pad("closer", 9) + "  " : "") + "verdict";
    out << p.dim(hdr) << "\n";
    for (const Entry* e : entries) {
      std::string line = "  " + pad(e->case_name, wc) + "  " + pad(e->op_name(), wo) + "  " +
                         pad(detail::tensor_label(*e), wt) + "  " +
                         pad(detail::cell_ulp(*e), 10, true) + "  " +
                         pad(detail::cell_abs(*e), 9, true) + "  ";
      if (oracle) line += pad(e->oracle ? e->oracle->closer : "-", 9) + "  ";
      out << line << p(compare::verdict_name(e->verdict), colour_of(e->verdict)) << "\n";
    }
  }

  // Training trajectories: one verdict per op that trained (first bad step, drift or mistake).
  const auto trajectories = detail::trajectories(r);
  if (!trajectories.empty()) out << "\n" << p.bold("training trajectories") << "\n";
  for (const Entry* e : trajectories) {
    const std::string label = (e->variant.empty() ? "" : "[" + e->variant + "] ") + e->dtype + "/" + e->case_name + "/" + e->op_name();
    const bool bad = e->trajectory->first_bad_step >= 0 || e->trajectory->checkpoints_failed > 0 || compare::is_failure(e->verdict);
    out << "  " << p.bold(label) << "  "
        << p(detail::trajectory_headline(*e), bad ? colour_of(Verdict::failed) : colour_of(Verdict::passed)) << "\n";
    const std::string ck = detail::trajectory_checkpoint_line(*e->trajectory);
    if (!ck.empty()) out << "    " << ck << "\n";
  }

  bool any_details = false;
  for (const auto& e : r.entries) {
    const bool show = detail::shows_details(e) || (opt.verbose && e.verdict != Verdict::passed) ||
                      e.verdict == Verdict::mistrusted;
    if (!show || (folded && detail::is_consequence(e))) continue;
    if (!any_details) out << "\n";
    any_details = true;
    const std::string label = (e.variant.empty() ? "" : "[" + e.variant + "] ") + e.id();
    std::string tag = e.verdict == Verdict::failed    ? "FAILED"
                      : e.verdict == Verdict::error   ? "ERROR"
                      : e.verdict == Verdict::invalid ? "INVALID"
                                                      : "MISTRUSTED";
    out << p(tag, colour_of(e.verdict)) << " " << p.bold(label) << "\n";
    if (!e.message.empty()) out << "  " << e.message << "\n";
    if (e.diagnosis) {
      if (!e.diagnosis->summary.empty())
        out << "  " << p("diagnosis:", "\033[1;36m") << " " << e.diagnosis->summary << "\n";
      else
        out << "  "
            << p.dim(fmt::format("diagnosis: none of {} usual layout mistakes explains it",
                                 e.diagnosis->tried))
            << "\n";
    }
    if (e.oracle)
      out << "  oracle: reference max abs " << detail::sci(e.oracle->ref_max_abs) << " ("
          << e.oracle->ref_max_ulp << " ULP), run " << detail::sci(e.oracle->run_max_abs) << " ("
          << e.oracle->run_max_ulp << " ULP): "
          << (e.oracle->closer == "tie" ? "equally close"
                                        : e.oracle->closer + " is closer to exact")
          << "\n";
    if (!e.bound_model.empty()) out << "  " << p.dim(detail::algorithm_line(e)) << "\n";
    if (!e.repro.empty()) out << "  " << p.dim("repro: " + e.repro) << "\n";
  }
  if (opt.verbose) {
    const auto lines = detail::algorithm_lines(r);
    if (!lines.empty()) out << "\n" << p.bold("algorithms") << p.dim(" (every other tensor: direct)") << "\n";
    for (const auto& l : lines) out << "  " << l << "\n";
  }
  if (folded)
    out << p.dim(fmt::format("({}, not detailed: --verbose)", detail::consequences_phrase(detail::consequence_counts(r))))
        << "\n";
  what_went_wrong();
  const auto c = r.counts();
  const char* col = r.exit_code() == 0   ? "\033[1;32m"
                    : r.exit_code() == 1 ? "\033[1;31m"
                                         : "\033[1;35m";
  (void)c;
  out << "\n" << p(r.summary_line(), col) << "\n";
}

namespace {
class TerminalReporter : public Reporter {
 public:
  TerminalReporter(std::ostream& out, TerminalOptions opt) : out_(out), opt_(opt) {}
  std::string name() const override { return "terminal"; }
  Status report(const compare::Report& r) override {
    render_terminal(out_, r, opt_);
    out_.flush();
    return Status::ok();
  }

 private:
  std::ostream& out_;
  TerminalOptions opt_;
};
}  // namespace

std::unique_ptr<Reporter> make_terminal_reporter(std::ostream& out, TerminalOptions opt) {
  return std::make_unique<TerminalReporter>(out, opt);
}

}  // namespace validate::report
