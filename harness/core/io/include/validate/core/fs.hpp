#pragma once
// File helpers. Every write is atomic: the bytes go to a temporary file in the same directory,
// are flushed, and the file is renamed into place, so a crash never leaves a half-written file
// under the final name.
#include <cstdint>
#include <string>
#include <string_view>

#include "validate/core/result.hpp"

namespace validate::fs {

Status write_atomic(const std::string& path, std::string_view bytes);
Status write_atomic(const std::string& path, const void* data, std::size_t size,
                    std::string_view prefix = {});  // prefix bytes (e.g. a .npy header) go first
// The same, a piece at a time: open() makes the temporary file, write() appends, commit() renames
// it into place. Destroyed without a successful commit(), it removes the temporary: nothing
// half-written ever has the final name. generate streams each result through one while hashing it.
//
// With `direct`, the bytes go to the disk with O_DIRECT through an aligned staging buffer instead
// of being copied into the page cache: on a 2-core VM the kernel's copy into fresh page-cache pages
// cost a third of generate's CPU time, and a set of several gigabytes gains nothing from being
// cached while it is written. A filesystem that refuses O_DIRECT (tmpfs, some network and FUSE
// filesystems) is written the ordinary way; `direct()` says which happened.
class AtomicFile {
 public:
  static Result<AtomicFile> open(const std::string& path, bool direct = false);
  AtomicFile(AtomicFile&& o) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  AtomicFile(const AtomicFile&) = delete;
  ~AtomicFile();
  Status write(const void* data, std::size_t size);
  Status commit();
  bool direct() const { return stage_ != nullptr; }

 private:
  AtomicFile(std::string path, std::string tmp, int fd) : path_(std::move(path)), tmp_(std::move(tmp)), fd_(fd) {}
  Status flush_stage(std::size_t bytes);
  void abandon();
  std::string path_, tmp_;
  int fd_ = -1;
  unsigned char* stage_ = nullptr;  // direct mode: kStage bytes, aligned to kAlign
  std::size_t staged_ = 0;
  std::uint64_t written_ = 0;
};
// A report the user names (--json, --md, --junit, --html): a new or regular file is written
// atomically as above; a character device or FIFO (and /dev/stdout, /dev/stderr) is written
// through directly and never renamed over; a symbolic link stays and its target is written by the
// same rules (made when missing; a failure names the link and its target).
Status write_report(const std::string& path, std::string_view bytes);
Result<std::string> read_text(const std::string& path);

// Opens a file others wrote, read-only, the one way every reader here does it: without blocking
// (a FIFO where a file belongs is refused at once: it used to hang verify, compare and run), checked
// with fstat to be a regular file, and unless `follow_symlink` not through a final symlink (a link
// in a set or a work directory could point anywhere). The caller closes `fd`.
struct OpenFile {
  int fd = -1;
  std::uint64_t size = 0;
};
Result<OpenFile> open_regular(const std::string& path, bool follow_symlink = false);
Status make_dirs(const std::string& path);
bool exists(const std::string& path);
// Joins a directory and a relative name; refuses names that would leave the directory
// ("../x", absolute paths, NUL) since set files come from manifests written by others.
Result<std::string> join_inside(const std::string& dir, std::string_view relative);

}  // namespace validate::fs
