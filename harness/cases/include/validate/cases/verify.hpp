#pragma once
// `validate verify`: re-hash every file of a set against its manifest and every input tensor
// against its metadata, and hold every error-bound scale to what compare relies on
// (scale_check.hpp).
#include <string>
#include <vector>

#include "validate/core/result.hpp"

namespace validate::cases {

struct VerifyReport {
  std::size_t files_checked = 0, inputs_checked = 0;
  std::vector<std::string> mismatches;  // one line each, naming the file and both hashes
  std::vector<std::string> warnings;    // files present but not in the manifest, ...
  // Non-empty: the manifest marks the set partial (merge --allow-partial). Its files may all be
  // intact (exit 0), but it is not the whole sweep, and verify says so on its own line.
  std::string partial;
  bool ok() const { return mismatches.empty(); }
};

// Error (exit 2): no manifest, unreadable manifest or metadata. Report with mismatches: exit 1.
Result<VerifyReport> verify_set(const std::string& set_dir);

}  // namespace validate::cases
