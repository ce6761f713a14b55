#pragma once
// An owning host tensor: a C-order buffer of one element type with a shape. The element type is
// what is in memory (a bfloat16 reference stored as float32 is a float32 Tensor); the logical dtype
// of a case travels in its metadata.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "validate/core/dtype.hpp"

namespace validate {

using Shape = std::vector<std::int64_t>;

std::int64_t shape_numel(const Shape& shape);
std::string shape_to_string(const Shape& shape);  // "[1, 8, 32, 32]"

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape);  // zero-filled
  // Storage left unwritten, for a caller that writes every element next (the input RNG, a copy out
  // of LibTorch, a file read): the zero-fill would be one more pass over up to a gigabyte, and the
  // pages are then first touched by the threads that fill them.
  static Tensor uninitialized(DType dtype, Shape shape);
  // A tensor over memory another owner allocated (LibTorch's result buffers: copying the
  // largest gradient out of LibTorch cost one more 300 MB buffer at generate's peak). `owner` keeps
  // the memory alive and frees it when the tensor goes; `data` must be 64-byte aligned and hold
  // nbytes. Unlike uninitialized(), nothing past the last element is guaranteed readable: only for
  // consumers that read exactly nbytes (hashing, writing .npy).
  static Tensor adopt(DType dtype, Shape shape, std::byte* data, std::shared_ptr<void> owner);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor&) = delete;  // copies of gigabyte tensors are explicit: clone()
  Tensor& operator=(const Tensor&) = delete;
  Tensor clone() const;

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::int64_t dim() const { return static_cast<std::int64_t>(shape_.size()); }
  std::int64_t numel() const { return numel_; }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel_) * dtype_size(dtype_); }

  std::byte* bytes() { return data_.get(); }
  const std::byte* bytes() const { return data_.get(); }
  template <class T> T* data() { return reinterpret_cast<T*>(data_.get()); }
  template <class T> const T* data() const { return reinterpret_cast<const T*>(data_.get()); }

  // Element i as double / float whatever the element type (bfloat16/float16 widened exactly).
  double get(std::int64_t i) const;
  void set(std::int64_t i, double v);  // rounds to the element type (nearest even)

  // Conversions (new tensors); float32 -> bfloat16/float16 round to nearest even.
  Tensor to(DType target) const;
  // Same data, new shape with the same element count.
  void reshape(Shape shape);

 private:
  struct Uninit {};
  Tensor(DType dtype, Shape shape, Uninit);
  struct AlignedFree {
    void operator()(std::byte* p) const;
  };
  DType dtype_ = DType::float32;
  Shape shape_;
  std::int64_t numel_ = 0;
  std::shared_ptr<std::byte> data_;  // shared only with an adopted buffer's owner (adopt())
};

// max |x| over the non-NaN values; none when a value is infinite (JSON has no infinity). generate
// records it per result as `max_abs`; verify and compare check it against the data.
std::optional<double> finite_max_abs(const Tensor& t);

// The NaN count and finite_max_abs of float32 values, accumulated a chunk at a time: verify's hash
// pass scans each chunk of a result file right after hashing it, while it is in cache, instead of
// reading the whole file again.
struct Float32Scan {
  std::int64_t nans = 0;
  float max_abs = 0;  // over the non-NaN values; +inf when one is infinite
  void add(const float* p, std::size_t n);
  std::optional<double> finite_max() const;
};

}  // namespace validate
