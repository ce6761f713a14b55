// `validate compare REF RUN`: pair, measure, gate, diagnose, report. Exit 0 when every gate passed,
// 1 when one failed, 2 on bad usage or unreadable/corrupt input.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "validate/compare/compare.hpp"
#include "validate/core/shell_quote.hpp"
#include "validate/report/reporter.hpp"

namespace validate::cli {

namespace {

struct CompareArgs {
  std::string ref, run, policy, oracle, only, variant, json, md, junit, html, color = "auto";
  std::string junit_suite{report::kDefaultJunitSuite};  // --junit-suite
  std::vector<std::string> gates;
  int threads = 0;
  bool no_diagnose = false, verbose = false, quiet = false, require_all = false;
};

namespace stdfs = std::filesystem;

// Where a report path ends up: links followed (a link's target is what gets written), the rest
// made absolute and normal, so two spellings of one file compare equal.
stdfs::path resolved(const std::string& p) {
  std::error_code ec;
  stdfs::path r = stdfs::weakly_canonical(p, ec);
  return ec ? stdfs::absolute(p).lexically_normal() : r;
}

bool inside(const stdfs::path& p, const stdfs::path& dir) {
  const stdfs::path rel = p.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

// Refused before anything is compared or written: a report written into the reference set, the run
// or the oracle replaced a file compare reads (--json REF/manifest.json destroyed the set and
// exited 0), and two reports on one path kept only the last. A character device or FIFO is
// written through, never replaced (report.hpp), so any number of reports may share one.
Status check_report_paths(const CompareArgs& a) {
  const std::pair<const char*, const std::string*> reports[] = {
      {"--json", &a.json}, {"--md", &a.md}, {"--junit", &a.junit}, {"--html", &a.html}};
  const std::pair<const char*, const std::string*> sets[] = {
      {"the reference set", &a.ref}, {"the run directory", &a.run}, {"the oracle", &a.oracle}};
  std::map<stdfs::path, std::pair<const char*, std::string>> taken;
  for (const auto& [flag, path] : reports) {
    if (path->empty()) continue;
    struct stat st {};
    if (::stat(path->c_str(), &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) continue;
    const stdfs::path target = resolved(*path);
    for (const auto& [what, dir] : sets)
      if (!dir->empty() && inside(target, resolved(*dir)))
        return Error{std::string(flag) + " " + *path + ": inside " + what + " " + *dir +
                     ": a report must not be written into a set compare reads"};
    auto [it, fresh] = taken.emplace(target, std::make_pair(flag, *path));
    if (!fresh)
      return Error{std::string(it->second.first) + " " + it->second.second + " and " + flag + " " + *path +
                   " name the same file (" + target.string() + "): each report needs a file of its own"};
  }
  return Status::ok();
}

int run_compare(const CompareArgs& a) {
  if (Status st = check_report_paths(a); !st) {
    std::cerr << "validate compare: " << st.message() << "\n";
    return 2;
  }
  compare::CompareOptions opt;
  opt.ref_dir = a.ref;
  opt.run_dir = a.run;
  opt.oracle_dir = a.oracle;
  opt.only = a.only;
  opt.variant = a.variant;
  opt.diagnose = !a.no_diagnose;
  opt.require_all = a.require_all;
  opt.threads = a.threads;
  opt.policy = compare::Policy::builtin();
  std::string prefix =
      "validate compare " + shell_arg(a.ref) + " " + shell_arg(a.run);
  if (!a.policy.empty()) {
    if (Status st = opt.policy.add_file(a.policy); !st) {
      std::cerr << "validate compare: --policy " << st.message() << "\n";
      return 2;
    }
    prefix += " --policy " + shell_arg(a.policy);
  }
  for (const auto& g : a.gates) {
    if (Status st = opt.policy.add_gate(g); !st) {
      std::cerr << "validate compare: " << st.message() << "\n";
      return 2;
    }
    prefix += " --gate " + shell_arg(g);
  }
  if (Status st = opt.policy.check_element_gates(); !st) {
    std::cerr << "validate compare: " << st.message() << "\n";
    return 2;
  }
  opt.repro_prefix = prefix;

  auto report = compare::compare_sets(opt);
  if (!report) {
    std::cerr << "validate compare: " << report.message() << "\n";
    return 2;
  }
  std::vector<std::unique_ptr<report::Reporter>> reporters;
  if (!a.quiet) {
    report::TerminalOptions t;
    t.color = a.color == "always" || (a.color == "auto" && report::wants_color(STDOUT_FILENO));
    t.verbose = a.verbose;
    reporters.push_back(report::make_terminal_reporter(std::cout, t));
  }
  if (!a.json.empty()) reporters.push_back(report::make_json_reporter(a.json));
  if (!a.md.empty()) reporters.push_back(report::make_markdown_reporter(a.md));
  if (!a.junit.empty()) reporters.push_back(report::make_junit_reporter(a.junit, a.junit_suite));
  if (!a.html.empty()) reporters.push_back(report::make_html_reporter(a.html));
  int code = report->exit_code();
  for (auto& r : reporters) {
    if (Status st = r->report(*report); !st) {
      std::cerr << "validate compare: writing the " << r->name() << " report: " << st.message()
                << "\n";
      code = 2;
    }
  }
  if (a.quiet) std::cout << report->summary_line() << "\n";
  return code;
}

}  // namespace

void register_compare(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand(
      "compare",
      "Compare a run with a reference set: ULP/abs/rel error, PCC, gates, diagnosis, reports");
  // Per registration (not static), so an App parsed twice in one process starts from defaults.
  auto a = std::make_shared<CompareArgs>();
  sub->add_option("ref", a->ref, "Reference set (validate-reference/1)")->required();
  sub->add_option("run", a->run,
                  "Run directory (validate-run/1); variants/ are compared one by one")
      ->required();
  sub->add_option("--policy", a->policy,
                  "Policy file (JSON, validate-policy/1) layered over the built-in policy");
  sub->add_option("--gate", a->gates,
                  "Override one gate: [DTYPE.][OP.][ROLE|TENSOR.]KEY=VALUE, e.g. "
                  "float32.loss.loss_abs=1e-7 (none: off)")
      ->take_all()
      ->allow_extra_args(false);
  sub->add_option("--oracle", a->oracle,
                  "A float64 oracle run: report which side is closer to exact");
  sub->add_option("--only", a->only,
                  "Compare only ids matching this regex (ids: dtype/case/op/tensor; RE2 syntax: no backreferences or lookaround)");
  sub->add_option("--variant", a->variant, "Compare only variants whose label matches this regex (RE2 syntax)");
  sub->add_option("--json", a->json, "Write the full report as JSON (schema_version 1)");
  sub->add_option("--md", a->md, "Write a Markdown summary (for a PR comment)");
  sub->add_option("--junit", a->junit, "Write JUnit XML (one testcase per tensor)");
  sub->add_option("--junit-suite", a->junit_suite,
                  "Name the JUnit testsuites <NAME>.<dtype> (default validate): tells several compares apart on a CI page")
      ->capture_default_str();
  sub->add_option("--html", a->html, "Write a self-contained HTML report with SVG plots");
  sub->add_option("--threads", a->threads, "Threads for the metric pass (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--color", a->color,
                  "Colour the terminal table: auto (TTY and no NO_COLOR), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  sub->add_flag("--require-all", a->require_all,
                "Fail (exit 1) when anything of the reference was not checked: not run, skipped, "
                "unsupported, a case or tensor the run omitted");
  sub->add_flag("--no-diagnose", a->no_diagnose, "Do not try layout mistakes on failing tensors");
  sub->add_flag("-v,--verbose", a->verbose, "Details for not-run and skipped entries too, and for the failures that follow from an earlier failure (a named mistake or a trajectory that parted)");
  sub->add_flag("-q,--quiet", a->quiet, "Only the summary line on the terminal");
  sub->callback([a, &exit_code] { exit_code = run_compare(*a); });
}

}  // namespace validate::cli
