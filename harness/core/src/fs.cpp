#include "validate/core/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
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

Status write_atomic(const std::string& path, const void* data, std::size_t size,
                    std::string_view prefix) {
  // Unique temporary name in the same directory so rename() is atomic on the same filesystem.
  static std::atomic<unsigned> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Error{"cannot create " + tmp + ": " + errno_text()};
  Status st = write_all(fd, prefix.data(), prefix.size(), path);
  if (st) st = write_all(fd, data, size, path);
  if (::close(fd) != 0 && st) st = Error{"closing " + tmp + ": " + errno_text()};
  if (!st) {
    ::unlink(tmp.c_str());
    return st;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string msg = "renaming " + tmp + " to " + path + ": " + errno_text();
    ::unlink(tmp.c_str());
    return Error{msg};
  }
  return Status::ok();
}

Status write_atomic(const std::string& path, std::string_view bytes) {
  return write_atomic(path, bytes.data(), bytes.size(), {});
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

}  // namespace validate::fs
