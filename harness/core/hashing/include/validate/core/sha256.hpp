#pragma once
// SHA-256 through OpenSSL's EVP interface, streaming so gigabyte files are hashed in pieces.
#include <cstddef>
#include <memory>
#include <string>

#include "validate/core/result.hpp"

namespace validate {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  void update(const void* data, std::size_t size);
  std::string hex_digest();  // finishes the hash; lower-case hex

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string sha256_hex(const void* data, std::size_t size);
Result<std::string> sha256_file(const std::string& path);

}  // namespace validate
