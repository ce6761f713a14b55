#pragma once
// `validate run`: reference set + runner -> run directory (validate-run/1, docs/formats.md).
// Every case and op runs even when others fail; outcomes are recorded per case.
#include <iosfwd>
#include <string>

#include "validate/cases/case_file.hpp"
#include "validate/core/json_io.hpp"
#include "validate/backends/runner.hpp"

namespace validate::runners {

struct RunOptions {
  std::string ref;
  std::string out = "run";
  std::string only;  // RE2 regex (core/pattern.hpp) over "dtype/case"
  cases::Shard shard;
  std::string layout_name = "torch";
  Json layout_json = Json::object();  // the resolved layout set, for run_info.json
  int progress = -1;                  // -1 auto, 0 quiet, 1 plain lines
  bool overwrite = false;             // --overwrite: empty a non-empty --out first
};

struct RunSummary {
  int ok = 0, error = 0, skipped = 0, unsupported = 0;  // op-level outcomes over all variants
  std::vector<std::string> failures;                    // "float32/k0072_ic008 conv2d: message"
  // Ops whose --repeat reruns were not bitwise identical: "float32/k0072_ic008 conv2d [variant]:
  // output, grad_weight". Reported, not failed: a nondeterministic algorithm can still be accurate.
  std::vector<std::string> nondeterministic;
  double seconds = 0;
  int interrupted = 0;  // the signal (SIGINT/SIGTERM) that stopped the run early; no manifest then
};

// Error: the reference set is unreadable/incomplete, --out cannot be claimed (it is, holds or lies
// in the reference set; it is not empty without overwrite; another writer holds it) or the runner
// could not be prepared (exit 2).
Result<RunSummary> run_cases(Runner& runner, const RunOptions& opt, std::ostream& log);

}  // namespace validate::runners
