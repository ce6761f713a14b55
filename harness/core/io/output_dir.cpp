#include "validate/core/output_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "validate/core/fs.hpp"
#include "validate/core/lock_holder.hpp"
#include "validate/core/tree.hpp"

namespace validate::fs {

namespace stdfs = std::filesystem;

namespace {

std::string canonical_spelling(const std::string& p) {
  std::error_code ec;
  stdfs::path c = stdfs::weakly_canonical(stdfs::absolute(p, ec), ec);
  if (ec) c = stdfs::absolute(p).lexically_normal();
  std::string s = c.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

// Takes the exclusive lock or names who holds it. The holder can let go between our failed flock
// and the read of /proc/locks (then the lock is free and the directory's contents decide), so an
// unnamed holder is looked for again before the message settles for the processes that have it open.
Status lock_or_name_holder(int fd, const std::string& name) {
  for (int attempt = 0;; ++attempt) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return Status::ok();
    const int e = errno;
    if (e == EINTR) continue;
    if (e != EWOULDBLOCK) return Error{name + ": cannot lock: " + std::strerror(e)};
    struct stat ds {};
    ::fstat(fd, &ds);
    std::string who = flock_holder(ds.st_dev, ds.st_ino);
    if (who.empty() && attempt < 4) {
      ::usleep(20000);
      continue;
    }
    if (who.empty()) {
      const std::string openers = other_openers(ds.st_dev, ds.st_ino);
      who = "another process" + (openers.empty() ? std::string() : " (" + openers + ")");
    }
    return Error{name + " is being written by " + who + "; wait for it to finish or write elsewhere"};
  }
}

}  // namespace

bool same_or_inside(const std::string& inner, const std::string& outer) {
  const std::string a = canonical_spelling(inner), b = canonical_spelling(outer);
  return a == b || (b == "/" ? true : a.size() > b.size() && a.compare(0, b.size(), b) == 0 && a[b.size()] == '/');
}

OutputDir& OutputDir::operator=(OutputDir&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = o.fd_;
    was_empty_ = o.was_empty_;
    o.fd_ = -1;
  }
  return *this;
}

OutputDir::~OutputDir() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

Result<OutputDir> claim_output_dir(const std::string& dir, const OutputDirRules& rules) {
  const std::string name = rules.option + " " + dir;
  if (dir.empty()) return Error{rules.option + " is empty"};
  for (const auto& p : rules.protected_dirs) {
    if (p.empty()) continue;
    if (same_or_inside(dir, p) && same_or_inside(p, dir))
      return Error{name + " is the reference set " + p + ": its files would be overwritten; write elsewhere"};
    if (same_or_inside(dir, p))
      return Error{name + " is inside the reference set " + p +
                   ": the set must hold exactly what its manifest lists; write elsewhere"};
    if (same_or_inside(p, dir))
      return Error{name + " contains the reference set " + p + ": write elsewhere"};
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
    return Error{name + " exists and is not a directory"};
  VALIDATE_TRY(make_dirs(dir));
  OutputDir out;
  out.path_ = dir;
  out.fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (out.fd_ < 0) return Error{name + ": cannot open: " + std::strerror(errno)};
  VALIDATE_TRY(lock_or_name_holder(out.fd_, name));
  auto walk = walk_tree(dir);
  if (!walk) return Error{name + ": " + walk.message()};
  out.was_empty_ = walk->entries.empty() && walk->errors.empty();
  if (!out.was_empty_ && !rules.keep_existing) {
    if (!rules.overwrite)
      return Error{name + " exists and is not empty: pass --overwrite to replace it whole (everything in it is "
                          "removed first), or write to a new directory"};
    if (Status st2 = empty_directory(dir); !st2) return Error{name + ": --overwrite: " + st2.message()};
  }
  return out;
}

}  // namespace validate::fs
