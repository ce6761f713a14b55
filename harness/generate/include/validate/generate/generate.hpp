#pragma once
// `validate generate`: case file -> reference set (validate-reference/1).
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "validate/cases/case_file.hpp"
#include "validate/generate/inputs.hpp"

namespace validate::generate {

struct GenerateOptions {
  std::string cases_path = "cases/default.json";
  std::string device = "cpu";
  std::vector<DType> dtypes;  // empty: the case file's
  std::string out = "ref";
  std::optional<std::uint64_t> seed;  // overrides the case file's
  Fill fill = Fill::random;
  std::string only;
  cases::Shard shard;
  bool allow_tf32 = false;
  int threads = 0;  // LibTorch, BLAS and input generation; 0: OMP_NUM_THREADS, else every core
  // Keep the cases an interrupted run already finished (metadata present and every tensor's value
  // hash matching it); regenerate the rest. The result is byte-identical to an uninterrupted run.
  bool resume = false;     // keep the cases an interrupted run with the same options finished
  bool overwrite = false;  // replace a non-empty --out whole
  int progress = -1;  // -1: a live line on a terminal, plain lines otherwise; 0: quiet; 1: plain
  // Tensors of 8 MiB and more written with O_DIRECT, past the page cache (fs.hpp, AtomicFile):
  // less CPU for a set that is read on another machine or does not fit in memory; a later read on
  // this machine then comes from the disk.
  bool direct_io = false;
};

struct GenerateSummary {
  int cases_ok = 0, cases_failed = 0, cases_resumed = 0;
  std::uint64_t bytes = 0;
  double seconds = 0, compute_seconds = 0, input_seconds = 0, wait_seconds = 0;
  std::string device_used;
};

// Exit-code semantics: an Error is bad input (exit 2); cases_failed > 0 is exit 1.
Result<GenerateSummary> generate(const GenerateOptions& opt, std::ostream& log);

}  // namespace validate::generate
