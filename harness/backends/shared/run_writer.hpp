#pragma once
// What one `validate run` writes (run_driver.cpp drives it): per-variant case records, result
// tensors, run_info.json and the manifests, with the summary and the time split. Internal to
// the shared part of the backends (harness/backends/shared).
#include <chrono>
#include <cstddef>
#include <map>
#include <string>

#include "validate/cases/refset.hpp"
#include "validate/cases/run_record.hpp"
#include "validate/core/json_io.hpp"
#include "validate/backends/run_driver.hpp"

namespace validate::runners::detail {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct VariantState {
  std::string root;                                  // directory of this variant's run
  std::map<std::string, cases::CaseRunRecord> records;  // "<dtype>/<case>" -> <case>_run.json
  std::map<std::string, int> outcomes;
  // What this run wrote, relative to root: the manifest lists exactly these. Hashing the tree
  // instead hashed whatever else was there (a 3 GB unrelated file, a 10 GB file a program left
  // in its work dir: 31 s and 10.8 GB resident).
  cases::FileMap files;
};

// Everything one `run` accumulates: per-variant records and files, the summary, the time split.
class RunWriter {
 public:
  RunWriter(const RunOptions& opt, RunSummary& sum) : opt_(opt), sum_(sum) {}

  // Writes the op's results into its variant and records its outcome.
  void record(const cases::RefCase& rc, cases::Op op, OpResult& r, const std::map<std::string, std::string>& consumed,
              double elapsed);

  // Per-case documents are written as soon as the case is done, so a killed run keeps its cases.
  void write_case_records(const cases::Case& c);

  void add_io_seconds(double s) { io_s_ += s; }
  const Status& write_error() const { return write_error_; }

  // run_info.json and the manifest of each variant, then of the top level (last). Interrupted:
  // run_info.json only, so no reader (compare, merge, verify) takes the run as complete.
  Status finish(const Runner& runner, std::size_t cases_done, std::size_t cases_total, Clock::time_point t0);

 private:
  VariantState& state_for(const std::string& v);

  void count(const std::string& key, const char* opn, const OpResult& r, VariantState& vs);

  Json run_info_base(const Runner& runner, std::size_t cases_done, std::size_t cases_total) const;

  // The top-level manifest lists the variants' files too, their manifests included.
  static Status list_variant_in_top(const std::string& v, const VariantState& vs, VariantState& top);

  const RunOptions& opt_;
  RunSummary& sum_;
  std::map<std::string, VariantState> variants_;
  Json paths_ = Json::object();  // op -> "<tensor>_path" -> distinct values
  Status write_error_;
  double io_s_ = 0;  // reading (and hashing) inputs, writing results: the run summary's time split
};

}  // namespace validate::runners::detail
