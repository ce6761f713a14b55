#include "validate/core/sha256.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <cstring>
#include <vector>

#include "validate/core/fs.hpp"

namespace validate {

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  int ok = impl_->ctx && EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr);
  assert(ok);
  (void)ok;
}

Sha256::~Sha256() {
  if (impl_ && impl_->ctx) EVP_MD_CTX_free(impl_->ctx);
}
Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;

void Sha256::update(const void* data, std::size_t size) {
  if (size) EVP_DigestUpdate(impl_->ctx, data, size);
}

std::string Sha256::hex_digest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx, md, &len);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < len; ++i) {
    s.push_back(hex[md[i] >> 4]);
    s.push_back(hex[md[i] & 15]);
  }
  return s;
}

std::string sha256_hex(const void* data, std::size_t size) {
  Sha256 h;
  h.update(data, size);
  return h.hex_digest();
}

Result<std::string> sha256_file(const std::string& path) {
  // Streamed through a 1 MiB buffer, not mapped: a mapping read whole counts the file against the
  // resident set (a 3 GB file hashed into a run manifest cost 3.4 GB RSS).
  auto f = fs::open_regular(path);
  if (!f) return f.status();
  const int fd = f->fd;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  Sha256 h;
  // One buffer per thread, reused: a fresh megabyte per file is churn (and under ASan each freed
  // one sits in the quarantine, which hostile.cli.metadata's RSS bound caught).
  thread_local std::vector<unsigned char> buf(1 << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string msg = "reading " + path + ": " + std::strerror(errno);
      ::close(fd);
      return Error{msg};
    }
    if (n == 0) break;
    h.update(buf.data(), static_cast<std::size_t>(n));
  }
  ::close(fd);
  return h.hex_digest();
}

}  // namespace validate
