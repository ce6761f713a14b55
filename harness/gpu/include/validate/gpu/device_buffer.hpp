#pragma once
// Owning device memory, move-only so a buffer is freed exactly once on every path (an early
// `return` on a failed cuDNN call included). Allocation failure is a value, not an exception.
#include <cstddef>
#include <string>

#include "validate/core/result.hpp"

namespace validate::gpu {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `what` names the buffer in the error message ("cudaMalloc(…) failed for grad_input (64 MiB):
  // …").
  static Result<DeviceBuffer> allocate(std::size_t bytes, const std::string& what = {});
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() { return ptr_; }
  const void* data() const { return ptr_; }
  template <class T>
  T* as() {
    return static_cast<T*>(ptr_);
  }
  template <class T>
  const T* as() const {
    return static_cast<const T*>(ptr_);
  }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Synchronous copies of the first `bytes` bytes (default: the whole buffer).
  Status upload(const void* host, std::size_t bytes);
  Status download(void* host, std::size_t bytes) const;
  Status fill_zero();

 private:
  void release() noexcept;
  void* ptr_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace validate::gpu
