// JUnit XML: one testcase per (variant, dtype, case, op, tensor); failed tensors and runner errors
// are <failure>s, unreadable inputs <error>s, not-run/skipped/unsupported <skipped>. Jenkins,
// GitLab and GitHub test tabs render it.
#include <sstream>

#include "format.hpp"
#include "validate/core/fs.hpp"
#include "validate/report/reporter.hpp"

namespace validate::report {

using compare::Entry;
using compare::Verdict;

namespace {

std::string xml(const std::string& s) { return detail::xml_escape(s); }

std::string details(const Entry& e) {
  std::string d = e.message;
  if (e.diagnosis && !e.diagnosis->summary.empty())
    d += "\ndiagnosis" +
         (e.diagnosis->named() ? " [" + e.diagnosis->named()->code + "]" : std::string()) + ": " +
         e.diagnosis->summary;
  if (e.trajectory) {
    d += "\ntrajectory: " + detail::trajectory_headline(e);
    const std::string ck = detail::trajectory_checkpoint_line(*e.trajectory);
    if (!ck.empty()) d += "\n" + ck;
  }
  if (e.stats)
    d += fmt::format("\nmax abs {} mean abs {} max rel {} max ULP {} p99 ULP {} pcc {:.9g}",
                     detail::sci(e.stats->max_abs), detail::sci(e.stats->mean_abs),
                     detail::sci(e.stats->max_rel), e.stats->ulp.max, e.stats->ulp.p99,
                     e.stats->pcc);
  if (!e.repro.empty()) d += "\nrepro: " + e.repro;
  return d;
}

}  // namespace

std::string render_junit(const compare::Report& r, std::string_view suite_prefix) {
  std::ostringstream body;
  long tests = 0, failures = 0, errors = 0, skipped = 0;
  for (const auto& [key, entries] : detail::groups(r)) {
    long t = 0, f = 0, er = 0, sk = 0;
    std::ostringstream cases;
    const std::string suite =
        std::string(suite_prefix) + "." + (key.first.empty() ? "" : key.first + ".") + key.second;
    for (const Entry* e : entries) {
      ++t;
      const std::string cls = suite + "." + e->case_name + (e->op ? "." + e->op_name() : "");
      cases << "    <testcase classname=\"" << xml(cls) << "\" name=\""
            << xml(detail::tensor_label(*e)) << "\" time=\"0\">";
      switch (e->verdict) {
        case Verdict::failed:
        case Verdict::error:
          ++f;
          cases << "\n      <failure type=\""
                << (e->verdict == Verdict::error ? "runner-error" : "gate") << "\" message=\""
                << xml(e->message) << "\">" << xml(details(*e)) << "</failure>\n    ";
          break;
        case Verdict::invalid:
          ++er;
          cases << "\n      <error type=\"invalid-input\" message=\"" << xml(e->message) << "\">"
                << xml(details(*e)) << "</error>\n    ";
          break;
        case Verdict::not_run:
        case Verdict::not_requested:
        case Verdict::skipped:
        case Verdict::unsupported:
          ++sk;
          cases << "\n      <skipped message=\""
                << xml(std::string(compare::verdict_name(e->verdict)) +
                       (e->message.empty() ? "" : ": " + e->message))
                << "\"/>\n    ";
          break;
        case Verdict::mistrusted:
          cases << "\n      <system-out>MISTRUSTED: " << xml(e->message) << "</system-out>\n    ";
          break;
        case Verdict::passed:
          // A trajectory's verdict is worth reading when it passed too (how close to its gate;
          // a checkpoint of it that failed).
          if (e->trajectory) cases << "\n      <system-out>" << xml(details(*e)) << "</system-out>\n    ";
          break;
      }
      cases << "</testcase>\n";
    }
    body << "  <testsuite name=\"" << xml(suite) << "\" tests=\"" << t << "\" failures=\"" << f
         << "\" errors=\"" << er << "\" skipped=\"" << sk << "\" time=\"0\">\n";
    // The comparison's warnings (a run of another manifest, gradients read in an undeclared
    // layout, a policy rule that gates nothing) belong to every suite: a CI page shows one suite
    // at a time, and each must say what the terminal says above its table.
    if (!r.self_check.empty() || !r.warnings.empty()) {
      body << "    <properties>";
      if (!r.self_check.empty())
        body << "<property name=\"self_check\" value=\"" << xml(r.self_check) << "\"/>";
      for (const auto& w : r.warnings) body << "<property name=\"warning\" value=\"" << xml(w) << "\"/>";
      body << "</properties>\n";
    }
    body << cases.str();
    if (!r.warnings.empty()) {
      body << "    <system-err>";
      for (const auto& w : r.warnings) body << xml("warning: " + w) << "\n";
      body << "</system-err>\n";
    }
    body << "  </testsuite>\n";
    tests += t;
    failures += f;
    errors += er;
    skipped += sk;
  }
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<testsuites name=\"" << xml(suite_prefix == kDefaultJunitSuite ? "validate compare" : std::string(suite_prefix))
    << (r.self_check.empty() ? "" : " (self-check)")
    << "\" tests=\"" << tests << "\" failures=\"" << failures
    << "\" errors=\"" << errors << "\" skipped=\"" << skipped << "\" time=\""
    << fmt::format("{:.3f}", r.elapsed_s) << "\">\n";
  o << body.str() << "</testsuites>\n";
  return o.str();
}

namespace {
class JunitReporter : public Reporter {
 public:
  JunitReporter(std::string path, std::string suite) : path_(std::move(path)), suite_(std::move(suite)) {}
  std::string name() const override { return "junit"; }
  Status report(const compare::Report& r) override {
    return fs::write_report(path_, render_junit(r, suite_));
  }

 private:
  std::string path_, suite_;
};
}  // namespace

std::unique_ptr<Reporter> make_junit_reporter(std::string path, std::string suite_prefix) {
  return std::make_unique<JunitReporter>(std::move(path), std::move(suite_prefix));
}

}  // namespace validate::report
