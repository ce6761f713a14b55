#include "validate/gpu/device_buffer.hpp"

#include <utility>

#include <fmt/format.h>

#include "validate/gpu/check.hpp"

namespace validate::gpu {

Result<DeviceBuffer> DeviceBuffer::allocate(std::size_t bytes, const std::string& what) {
  DeviceBuffer b;
  if (bytes == 0) return b;
  const cudaError_t e = cudaMalloc(&b.ptr_, bytes);
  if (e != cudaSuccess) {
    // cudaMalloc's failure is also left as the runtime's last error; it is not sticky, but the
    // next kernel launch's cudaGetLastError() would report it as that launch's failure and fail
    // the next case. The failure is returned here, so clear it.
    (void)cudaGetLastError();
    b.ptr_ = nullptr;
    return Error{fmt::format("cudaMalloc(…) failed{} ({:.1f} MiB): {}",
                             what.empty() ? "" : " for " + what,
                             static_cast<double>(bytes) / (1 << 20), gpu_error_text(e))};
  }
  b.size_ = bytes;
  return b;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    ptr_ = std::exchange(o.ptr_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() noexcept {
  // A failing cudaFree in a destructor has nowhere to go; the next checked call reports the
  // (sticky) error instead.
  if (ptr_) (void)cudaFree(ptr_);
  ptr_ = nullptr;
  size_ = 0;
}

Status DeviceBuffer::upload(const void* host, std::size_t bytes) {
  if (bytes > size_)
    return Error{fmt::format("upload of {} bytes into a {}-byte device buffer", bytes, size_)};
  if (bytes == 0) return Status::ok();
  VALIDATE_GPU_TRY(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice));
  return Status::ok();
}

Status DeviceBuffer::download(void* host, std::size_t bytes) const {
  if (bytes > size_)
    return Error{fmt::format("download of {} bytes from a {}-byte device buffer", bytes, size_)};
  if (bytes == 0) return Status::ok();
  VALIDATE_GPU_TRY(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost));
  return Status::ok();
}

Status DeviceBuffer::fill_zero() {
  if (size_ == 0) return Status::ok();
  VALIDATE_GPU_TRY(cudaMemset(ptr_, 0, size_));
  return Status::ok();
}

}  // namespace validate::gpu
