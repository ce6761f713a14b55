#pragma once
// What a comparison produces: one Entry per (variant, dtype, case, op, tensor), with its verdict,
// statistics, the gate checks that decided it and, for failures, a diagnosis and a repro command.
// Every reporter (terminal, JSON, Markdown, JUnit, HTML) renders this one structure.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "validate/diagnosis/diagnosis.hpp"
#include "validate/metrics/metrics.hpp"
#include "validate/compare/policy.hpp"
#include "validate/train/trajectory_stats.hpp"
#include "validate/core/tensor.hpp"
#include "validate/ops/op.hpp"

namespace validate::compare {

// Outcomes are a closed set, kept apart from errors (benchdnn's res_t).
enum class Verdict {
  passed,
  failed,       // a gate failed, or the run is missing/mismatched/fed different inputs
  mistrusted,   // gates passed, but the reference is mostly zeros: a broken stack could pass too
  not_run,      // in the reference, not declared by the runner
  not_requested,  // in the reference, and the run did not ask for it (a forward-only program)
  skipped,      // the runner skipped the op (outcome "skipped")
  unsupported,  // the runner cannot do the op (outcome "unsupported")
  error,        // the runner failed on the op (outcome "error"): counts as a failure
  invalid,      // unreadable or corrupt input: the comparison itself could not be made (exit 2)
};
const char* verdict_name(Verdict v);
bool is_failure(Verdict v);  // failed, error

struct Check {
  std::string name;   // "max_ulp", "beyond_tolerance", "min_pcc", "loss_abs", "nonfinite", ...
  double value = 0;   // what was measured
  double limit = 0;   // the gate
  bool upper = true;  // value must be <= limit (false: >=)
  bool passed = true;
};

struct LossStats {
  double ref = 0, run = 0, abs_diff = 0, rel_diff = 0;
  std::uint64_t ulp = 0;  // float32 ULPs (the loss is a float32 scalar for every dtype)
};

// Three-way mode: each side against a float64 oracle, the oracle rounded to the logical dtype.
struct OracleComparison {
  double ref_max_abs = 0, run_max_abs = 0;
  std::uint64_t ref_max_ulp = 0, run_max_ulp = 0;
  std::string closer;  // "run", "reference" or "tie"
};

struct Entry {
  std::string variant;  // "" for a run without variants
  std::string dtype, case_name;
  std::optional<ops::Op> op;  // none: a whole-case entry (the run lacks the case, its inputs differ)
  std::string tensor;         // "" for an op-level entry (the runner's outcome for the whole op)
  std::optional<ops::Role> role;  // none: op-level, or the reference's metadata names no role
  std::string axes;
  Shape shape;
  std::int64_t K = 0;  // reduction length of the op, for error-versus-K plots
  Verdict verdict = Verdict::passed;
  std::string message;  // one line: why it failed / was not compared
  std::optional<TensorStats> stats;
  std::optional<LossStats> loss;
  std::optional<Gates> gates;
  std::vector<Check> checks;
  std::optional<Diagnosis> diagnosis;
  std::optional<OracleComparison> oracle;
  // A training case's loss curve (role loss_curve): the trajectory verdict (trajectory_stats.hpp).
  std::optional<TrajectoryStats> trajectory;
  // The algorithm that computed the tensor (the run's info.algorithms; "direct" when it names
  // none) and the error-bound model applied ("" when no error bound was checked): docs/compare.md,
  // "Algorithm-aware bounds".
  std::string algorithm, bound_model;
  // The gate held this gradient to its stored dL/dy choice (bounds.hpp, BoundOptions::choice); the
  // diagnosis then holds its hypotheses to the same bound.
  bool bound_used_choice = false;
  std::string worst_coords;  // "n=0 c=5 h=31 w=0"
  std::string repro;         // a command that compares only this tensor

  std::string id() const;  // dtype/case/op/tensor (dtype/case/op for op-level entries)
  // The names reports write (ops::op_name, ops::role_name); "" when there is none.
  std::string op_name() const;
  std::string role_name() const;
};

struct Counts {
  std::int64_t not_requested = 0;
  std::int64_t passed = 0, failed = 0, mistrusted = 0, not_run = 0, skipped = 0, unsupported = 0,
               error = 0, invalid = 0;
  void add(Verdict v);
};

struct Report {
  std::string ref_dir, run_dir, oracle_dir;
  std::vector<std::string> variants;                   // labels compared ("" = the run itself)
  nlohmann::json run_info = nlohmann::json::object();  // run_info.json of the run (top level)
  nlohmann::json policy = nlohmann::json::object();    // effective rules
  std::vector<Entry> entries;
  std::vector<std::string> input_errors;  // corrupt or unreadable inputs (exit 2)
  std::vector<std::string> warnings;  // e.g. the run was made from a different reference manifest
  std::string created_at, harness_version, git_commit, kernel_isa;
  double elapsed_s = 0;
  // --require-all: anything the reference has that the run did not check (not run, not
  // requested, skipped, unsupported) fails the comparison (exit 1).
  bool require_all = false;
  // The reference set or run is marked partial (merge --allow-partial): with require_all, exit 1.
  std::vector<std::string> partial;
  // Non-empty: the run is the references' own stack, and this says so (self_check.hpp). Every
  // reporter labels the comparison a self-check.
  std::string self_check;

  Counts counts() const;
  // 2: an input was unreadable/corrupt; 1: a gate failed, nothing at all was compared, or (with
  // require_all) something was not run; 0 otherwise.
  int exit_code() const;
  std::string summary_line() const;  // "validate: 46 passed, 2 failed, 0 not run"
};

// The gate checks of one compared tensor and, for each failed check, the sentence `validate
// compare` reports ("3 of 4096 elements beyond tolerance (atol 1e-05); worst at n=0 c=5 h=31 w=0:
// ref 0.1, run 0.3 (abs err 0.2, 12 ULP); would pass with atol >= 0.2 or rtol >= 2"). Shared with
// the GoogleTest matchers (validate/testing/matchers.hpp) so a failing test says the same thing.
struct GateResult {
  std::vector<Check> checks;
  std::vector<std::string> reasons;  // one per failed check, in check order
  bool passed() const;
};
GateResult check_tensor_gates(const TensorStats& s, const Gates& gates, const Shape& shape,
                              const std::string& axes, const ArrayView& ref, const ArrayView& run);

// "n=0 c=5 h=31 w=0" from a flat C-order index, the shape and canonical axis letters.
std::string format_coords(std::int64_t index, const Shape& shape, const std::string& axes);

}  // namespace validate::compare
