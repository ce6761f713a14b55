#pragma once
// The hashing half of `validate verify`, done up front on all cores (core/parallel_hash.hpp):
// every file the manifest lists, for every input of every case its float32 value hash, and for
// every result its NaN count and max|x|, each taken in the same pass as the file hash. verify_set() then only looks results up; a file this pass
// did not hash (missing, a symlink, a FIFO, not float32 C-order) goes through verify_set()'s own
// checks exactly as before, so nothing is skipped and no check is weakened.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "validate/cases/refset.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/parallel_hash.hpp"

namespace validate::cases {

class VerifyHashes {
 public:
  // `manifest` as read_manifest() returned it; set_dir as verify_set() got it; `cases` the set's
  // cases as verify_set() loaded them (their inputs get value hashes too).
  static VerifyHashes compute(const std::string& set_dir, const Json& manifest, const std::vector<RefCase>& cases,
                              int threads = 0);
  // The file's SHA-256 when this pass hashed it.
  std::optional<std::string> file_sha256(const std::string& path) const;
  // Shape and value hash when this pass took them (float32 C-order .npy).
  const FileHashResult* value(const std::string& path) const;
  // Shape, NaN count and max|x| of a result when this pass scanned it (float32 C-order .npy).
  const FileHashResult* scan(const std::string& path) const;

 private:
  const FileHashResult* find(const std::string& path) const;
  std::map<std::string, FileHashResult> by_path_;  // key: lexically normal path
};

}  // namespace validate::cases
