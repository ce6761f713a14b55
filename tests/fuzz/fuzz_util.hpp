#pragma once
// Shared helpers for the libFuzzer targets (tests/fuzz). Each target feeds the fuzzer's bytes to
// the same parser the CLI uses; the sanitizers (ASan + UBSan, compiled into the libraries by the
// build-fuzz configuration) turn any memory error, overflow or uncaught exception into a crash.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

namespace validate::fuzz {

// A regular file on tmpfs (/dev/shm, else $TMPDIR or /tmp), rewritten with every input, so
// path-based readers (npy::read, MappedArray::open, read_json) run their real code. Not a memfd's
// /proc/self/fd/N path: that is a symlink, which the readers refuse (O_NOFOLLOW).
class MemFile {
 public:
  MemFile() {
    const char* tmp = std::getenv("TMPDIR");
    for (std::string dir : {std::string("/dev/shm"), std::string(tmp ? tmp : "/tmp"), std::string("/tmp")}) {
      std::string templ = dir + "/validate-fuzz-XXXXXX";
      fd_ = ::mkstemp(templ.data());
      if (fd_ >= 0) {
        path_ = templ;
        break;
      }
    }
    if (fd_ < 0) {
      std::perror("mkstemp");
      std::abort();
    }
  }
  ~MemFile() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  const std::string& set(const std::uint8_t* data, std::size_t size) {
    if (::ftruncate(fd_, 0) != 0) std::abort();
    std::size_t done = 0;
    while (done < size) {
      ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) std::abort();
      done += static_cast<std::size_t>(n);
    }
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// Parses like read_json does (no exceptions); nullopt-like discarded value on bad JSON.
inline nlohmann::json parse_json(const std::uint8_t* data, std::size_t size) {
  return nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
}

}  // namespace validate::fuzz
