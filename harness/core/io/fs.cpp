#include "validate/core/fs.hpp"
#include "validate/core/no_links.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace validate::fs {

namespace {
std::string errno_text() { return std::strerror(errno); }

Status write_all(int fd, const void* data, std::size_t size, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size > (1u << 30) ? (1u << 30) : size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error{"writing " + path + ": " + errno_text()};
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return Status::ok();
}
}  // namespace

namespace {
// O_DIRECT wants the buffer, the file offset and the length aligned to the device's logical block
// (512 or 4096 bytes): 4096 suits both. Every staged write but the last is a whole kStage.
constexpr std::size_t kAlign = 4096;
constexpr std::size_t kStage = std::size_t(4) << 20;
}  // namespace

Result<AtomicFile> AtomicFile::open(const std::string& path, bool direct) {
  // Unique temporary name in the same directory so rename() is atomic on the same filesystem.
  static std::atomic<unsigned> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  int fd = -1;
#ifdef O_DIRECT
  if (direct) fd = ::open(tmp.c_str(), flags | O_DIRECT, 0644);  // EINVAL: not on this filesystem
#endif
  const bool got_direct = fd >= 0;
  if (fd < 0) fd = ::open(tmp.c_str(), flags, 0644);
  if (fd < 0) return Error{"cannot create " + tmp + ": " + errno_text()};
  AtomicFile f(path, std::move(tmp), fd);
  if (got_direct) f.stage_ = static_cast<unsigned char*>(std::aligned_alloc(kAlign, kStage));
#ifdef O_DIRECT
  if (got_direct && !f.stage_) (void)::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_DIRECT);
#endif
  return f;
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : path_(std::move(o.path_)), tmp_(std::move(o.tmp_)), fd_(o.fd_), stage_(o.stage_), staged_(o.staged_),
      written_(o.written_) {
  o.fd_ = -1;
  o.tmp_.clear();
  o.stage_ = nullptr;
}

AtomicFile::~AtomicFile() { abandon(); }

void AtomicFile::abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
  std::free(stage_);
  stage_ = nullptr;
}

// Writes the first `bytes` of the staging buffer (a multiple of kAlign). A write the filesystem
// refuses with EINVAL although it took O_DIRECT at open (or a short write that leaves the rest
// unaligned) is retried, and the file finished, without O_DIRECT.
Status AtomicFile::flush_stage(std::size_t bytes) {
  const unsigned char* p = stage_;
  std::size_t left = bytes;
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
#ifdef O_DIRECT
      const int fl = ::fcntl(fd_, F_GETFL);
      if (err == EINVAL && fl >= 0 && (fl & O_DIRECT) && ::fcntl(fd_, F_SETFL, fl & ~O_DIRECT) == 0) continue;
#endif
      return Error{"writing " + path_ + ": " + std::strerror(err)};
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  written_ += bytes;
  staged_ = 0;
  return Status::ok();
}

Status AtomicFile::write(const void* data, std::size_t size) {
  if (fd_ < 0) return Error{"writing " + path_ + ": the file is already closed"};
  Status st;
  if (!stage_) {
    st = write_all(fd_, data, size, path_);
  } else {
    const auto* p = static_cast<const unsigned char*>(data);
    while (st && size > 0) {
      const std::size_t n = std::min(size, kStage - staged_);
      std::memcpy(stage_ + staged_, p, n);
      staged_ += n;
      p += n;
      size -= n;
      if (staged_ == kStage) st = flush_stage(kStage);
    }
  }
  if (!st) abandon();
  return st;
}

Status AtomicFile::commit() {
  if (fd_ < 0) return Error{"writing " + path_ + ": the file is already closed"};
  if (stage_ && staged_ > 0) {
    // The tail, zero-padded to a whole block, then the file cut back to its length.
    const std::uint64_t size = written_ + staged_;
    const std::size_t padded = (staged_ + kAlign - 1) / kAlign * kAlign;
    std::memset(stage_ + staged_, 0, padded - staged_);
    Status st = flush_stage(padded);
    if (st && ::ftruncate(fd_, static_cast<off_t>(size)) != 0) st = Error{"truncating " + tmp_ + ": " + errno_text()};
    if (!st) {
      abandon();
      return st;
    }
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    Status st = Error{"closing " + tmp_ + ": " + errno_text()};
    abandon();
    return st;
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    Status st = Error{"renaming " + tmp_ + " to " + path_ + ": " + errno_text()};
    abandon();
    return st;
  }
  tmp_.clear();
  std::free(stage_);
  stage_ = nullptr;
  return Status::ok();
}

Status write_atomic(const std::string& path, const void* data, std::size_t size,
                    std::string_view prefix) {
  auto f = AtomicFile::open(path);
  if (!f) return f.status();
  VALIDATE_TRY(f->write(prefix.data(), prefix.size()));
  VALIDATE_TRY(f->write(data, size));
  return f->commit();
}

Status write_atomic(const std::string& path, std::string_view bytes) {
  return write_atomic(path, bytes.data(), bytes.size(), {});
}

namespace {
// Writes all of `bytes` to an open descriptor that is not ours to replace (a device, a FIFO, the
// terminal): straight through, no temporary file, no rename.
Status write_through(int fd, std::string_view bytes, const std::string& path) {
  Status st = write_all(fd, bytes.data(), bytes.size(), path);
  return st;
}

// /dev/stdout, /dev/fd/1, /proc/self/fd/1 (and 2): the descriptor validate already holds. Opening
// the path again would start a new file description at offset 0 (overwriting a `>>` log) and a
// rename would replace the file the shell redirected to, leaving stdout empty.
int standard_fd(const std::string& path) {
  for (int fd : {1, 2}) {
    const std::string n = std::to_string(fd);
    if (path == "/dev/fd/" + n || path == "/proc/self/fd/" + n || path == (fd == 1 ? "/dev/stdout" : "/dev/stderr"))
      return fd;
  }
  return -1;
}
}  // namespace

Status write_report(const std::string& path, std::string_view bytes) {
  if (const int fd = standard_fd(path); fd >= 0) {
    std::cout.flush();  // what validate printed before comes first
    std::cerr.flush();
    return write_through(fd, bytes, path);
  }
  struct stat ls {};
  if (::lstat(path.c_str(), &ls) != 0) return write_atomic(path, bytes);  // a new file
  if (S_ISREG(ls.st_mode)) return write_atomic(path, bytes);
  std::string target = path;
  struct stat st = ls;
  if (S_ISLNK(ls.st_mode)) {
    // The link is the user's: it stays, and what it points to is written (made when missing).
    // Followed link by link (weakly_canonical stops at a link whose target does not exist yet).
    std::filesystem::path at = path;
    for (int hop = 0;; ++hop) {
      struct stat hs {};
      if (::lstat(at.c_str(), &hs) != 0 || !S_ISLNK(hs.st_mode)) break;
      if (hop == 40) return Error{path + ": too many levels of symbolic links"};
      std::error_code ec;
      const std::filesystem::path next = std::filesystem::read_symlink(at, ec);
      if (ec) return Error{path + ": cannot read the symbolic link " + at.string() + ": " + ec.message()};
      at = next.is_absolute() ? next : at.parent_path() / next;
    }
    target = at.lexically_normal().string();
    if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) {
      Status w = write_atomic(target, bytes);
      if (!w) return Error{path + " is a symbolic link to " + target + ": " + w.message()};
      return w;
    }
  }
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
    // Never renamed over (that replaced /dev/full with a regular file when run as root): opened
    // for writing and written through, so a FIFO's reader or a terminal gets the report.
    const int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return Error{"cannot open " + path + " for writing: " + errno_text()};
    Status w = write_through(fd, bytes, path);
    if (::close(fd) != 0 && w) w = Error{"closing " + path + ": " + errno_text()};
    return w;
  }
  if (S_ISDIR(st.st_mode)) return Error{path + " is a directory: name a file for the report"};
  return Error{path + " is neither a regular file, a device nor a FIFO: not written"};
}

Result<OpenFile> open_regular(const std::string& path, bool follow_symlink) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow_symlink ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    if (errno == ELOOP && !follow_symlink) return Error{path + " is a symbolic link: only regular files are read here"};
    return Error{"cannot open " + path + ": " + errno_text()};
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error{path + " is not a regular file"};
  }
  return OpenFile{fd, static_cast<std::uint64_t>(st.st_size)};
}

Result<std::string> read_text(const std::string& path) {
  // Symlinks followed: a case file or policy the user names may well be one.
  auto f = open_regular(path, /*follow_symlink=*/true);
  if (!f) return f.status();
  const int fd = f->fd;
  std::string out;
  out.resize(static_cast<std::size_t>(f->size));
  std::size_t got = 0;
  for (;;) {
    if (got == out.size()) out.resize(out.size() + 4096);
    ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::string msg = "reading " + path + ": " + errno_text();
      ::close(fd);
      return Error{msg};
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

Status make_dirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return Error{"cannot create directory " + path + ": " + ec.message()};
  return Status::ok();
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

Result<std::string> join_inside(const std::string& dir, std::string_view relative) {
  if (relative.empty()) return Error{"empty file name"};
  if (relative.find('\0') != std::string_view::npos)
    return Error{"file name contains a NUL byte"};
  if (relative.front() == '/') return Error{"absolute path '" + std::string(relative) + "' is not allowed here"};
  std::filesystem::path rel{std::string(relative)};
  for (const auto& part : rel) {
    if (part == "..") return Error{"path '" + std::string(relative) + "' leaves the directory"};
  }
  return (std::filesystem::path(dir) / rel).lexically_normal().string();
}

Status refuse_links_below(const std::string& root, const std::string& path) {
  namespace stdfs = std::filesystem;
  const stdfs::path r = stdfs::path(root).lexically_normal();
  const stdfs::path p = stdfs::path(path).lexically_normal();
  const stdfs::path rel = p.lexically_relative(r);
  if (rel.empty() || *rel.begin() == "..") return Error{path + " is not inside " + root};
  if (rel == ".") return Status::ok();
  stdfs::path at = r;
  for (const auto& part : rel) {
    at /= part;
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0) {
      if (errno == ENOENT) return Status::ok();  // made by validate from here on
      return Error{"cannot inspect " + at.string() + ": " + errno_text()};
    }
    if (S_ISLNK(st.st_mode))
      return Error{at.string() + " is a symbolic link inside " + root +
                   ": nothing is written through it (a program the run executed must have made it)"};
  }
  return Status::ok();
}

}  // namespace validate::fs
