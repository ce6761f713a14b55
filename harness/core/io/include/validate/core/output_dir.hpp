#pragma once
// Claiming the directory a command writes (`generate --out`, `run --out`, `merge OUT`).
//
// A set or run directory is exactly what its manifest lists, so a command must never write into a
// directory that holds anything else: `run --out REF` overwrote the references and then
// passed against itself; `run --out OLD_RUN --only x` left 64 stale results that compare passed;
// two `generate`s into one --out interleaved. The rules, in order:
//   1. --out must not be, contain or lie inside a protected directory (the reference set read).
//   2. An exclusive lock (flock on the directory itself, so no lock file joins the set) is held
//      until the command ends; a second writer is refused, naming the holder's pid and command.
//   3. An existing directory must be empty, unless --overwrite (everything in it is removed first,
//      symlinks unlinked, never followed: nothing old is ever mixed with the new) or --resume
//      (the caller checks that the directory was made with the same options).
#include <string>
#include <vector>

#include "validate/core/result.hpp"

namespace validate::fs {

struct OutputDirRules {
  std::string option = "--out";               // how the user named it, for messages
  std::vector<std::string> protected_dirs;    // e.g. the reference set of `run`
  bool overwrite = false;                     // empty a non-empty directory first
  bool keep_existing = false;                 // --resume: a non-empty directory is the caller's
};

// Holds the lock for as long as it lives (move-only).
class OutputDir {
 public:
  OutputDir() = default;
  OutputDir(OutputDir&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_), was_empty_(o.was_empty_) { o.fd_ = -1; }
  OutputDir& operator=(OutputDir&& o) noexcept;
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;
  ~OutputDir();

  const std::string& path() const { return path_; }
  bool was_empty() const { return was_empty_; }  // before --overwrite emptied it

 private:
  friend Result<OutputDir> claim_output_dir(const std::string&, const OutputDirRules&);
  std::string path_;
  int fd_ = -1;
  bool was_empty_ = true;
};

// Creates `dir` if needed, checks the rules above and takes the lock. Errors name the directory and
// say what to do (exit 2 in every command).
Result<OutputDir> claim_output_dir(const std::string& dir, const OutputDirRules& rules);

// "/a/b" relative to "/a": true when `inner` is `outer` or lies below it (both made absolute and
// canonical as far as they exist, so symlinked spellings of one directory compare equal).
bool same_or_inside(const std::string& inner, const std::string& outer);

}  // namespace validate::fs
