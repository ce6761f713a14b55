#include "validate/core/output_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "validate/core/fs.hpp"
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

// Who holds an flock on inode `ino`: "pid 1234 (validate generate --out x)", from /proc/locks.
std::string lock_holder(dev_t dev, ino_t ino) {
  std::ifstream in("/proc/locks");
  std::string line;
  while (std::getline(in, line)) {
    // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
    std::istringstream ss(line);
    std::string idx, kind, adv, mode, pid, where;
    if (!(ss >> idx >> kind)) continue;
    if (kind == "->") ss >> kind;  // a blocked waiter's line
    if (!(ss >> adv >> mode >> pid >> where) || kind != "FLOCK") continue;
    const auto c1 = where.find(':'), c2 = where.rfind(':');
    if (c1 == std::string::npos || c2 == c1) continue;
    try {
      const unsigned long maj = std::stoul(where.substr(0, c1), nullptr, 16);
      const unsigned long min = std::stoul(where.substr(c1 + 1, c2 - c1 - 1), nullptr, 16);
      const unsigned long long node = std::stoull(where.substr(c2 + 1));
      if (node != static_cast<unsigned long long>(ino) || maj != major(dev) || min != minor(dev)) continue;
    } catch (const std::exception&) {
      continue;
    }
    std::string cmd;
    std::ifstream cl("/proc/" + pid + "/cmdline", std::ios::binary);
    std::getline(cl, cmd, '\xff');
    for (auto& ch : cmd)
      if (ch == '\0') ch = ' ';
    while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
    return "pid " + pid + (cmd.empty() ? "" : " (" + cmd + ")");
  }
  return "another process";
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
  if (::flock(out.fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    if (e == EWOULDBLOCK) {
      struct stat ds {};
      ::fstat(out.fd_, &ds);
      return Error{name + " is being written by " + lock_holder(ds.st_dev, ds.st_ino) +
                   "; wait for it to finish or write elsewhere"};
    }
    return Error{name + ": cannot lock: " + std::strerror(e)};
  }
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
