#pragma once
// A read-only memory map of a whole file (move-only RAII). Empty files map to a null view.
#include <cstddef>
#include <string>

#include "validate/core/result.hpp"

namespace validate {

class MappedFile {
 public:
  MappedFile() = default;
  static Result<MappedFile> open(const std::string& path);
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Tells the kernel the map will be read front to back (bigger read-ahead).
  void advise_sequential() const;

 private:
  std::string path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace validate
