#pragma once
// `validate compare REF RUN`: load both sides, pair them, measure every declared tensor, gate it
// by the policy, diagnose failures, and (with an oracle) say which side is closer to exact.
#include <functional>
#include <string>

#include "validate/compare/comparison.hpp"
#include "validate/compare/policy.hpp"
#include "validate/core/result.hpp"

namespace validate::compare {

struct CompareOptions {
  std::string ref_dir, run_dir;
  std::string oracle_dir;  // "" for two-way
  Policy policy = Policy::builtin();
  std::string only;     // RE2 regex (core/pattern.hpp) searched in "dtype/case/op/tensor"
  std::string variant;  // RE2 regex over variant labels ("" = all)
  bool diagnose = true;
  bool require_all = false;  // not run / skipped / unsupported fail the comparison (Report)
  int threads = 0;  // metric threads; 0 = all cores
  // The start of each repro command: "validate compare REF RUN [--policy F] [--gate ...]".
  std::string repro_prefix;
  std::function<void(const Entry&)> on_entry;  // progress (called as each entry is decided)
};

// Error (exit 2): bad regex, unreadable or incomplete reference/run/oracle directory. Corrupt
// tensor files do not abort the comparison: they become `invalid` entries (also exit 2).
Result<Report> compare_sets(const CompareOptions& opt);

}  // namespace validate::compare
