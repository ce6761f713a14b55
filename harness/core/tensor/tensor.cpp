#include "validate/core/tensor.hpp"

#include "validate/core/checked_shape.hpp"
#include "validate/core/huge_pages.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace validate {

std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  if (a < 0 || b < 0) return std::nullopt;
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<std::int64_t> checked_numel(const Shape& shape) {
  for (auto d : shape)
    if (d < 0) return std::nullopt;
  for (auto d : shape)
    if (d == 0) return 0;
  std::int64_t n = 1;
  for (auto d : shape) {
    auto m = checked_mul(n, d);
    if (!m) return std::nullopt;
    n = *m;
  }
  return n;
}

std::int64_t shape_numel(const Shape& shape) {
  for (auto d : shape)
    if (d == 0) return 0;  // (2^40, 2^23, 0) has no elements, whatever its other sizes multiply to
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) return n * d;  // not a shape; kept as it always was (callers refuse negatives first)
    auto m = checked_mul(n, d);
    if (!m) return std::numeric_limits<std::int64_t>::max();
    n = *m;
  }
  return n;
}

std::string shape_to_string(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

void Tensor::AlignedFree::operator()(std::byte* p) const { free_buffer(p); }

Tensor::Tensor(DType dtype, Shape shape, Uninit) : dtype_(dtype), shape_(std::move(shape)) {
  numel_ = shape_numel(shape_);
  assert(numel_ >= 0);
  // 64-byte alignment: cache-line aligned buffers for the converters and vectorised metrics.
  std::size_t n = (nbytes() + 63) / 64 * 64;
  if (n == 0) n = 64;
  // Large buffers on transparent huge pages (huge_pages.hpp). Measured with LibTorch's buffers on
  // them too (generate's allocator): the default sweep's system time fell from 24-25 s to 18 s on
  // a 2-core VM and its input stage from 3.1 to 2.5 s (an older VM once drew inputs slower on
  // them, with only these buffers advised).
  void* p = alloc_buffer(n);
  if (!p) throw std::bad_alloc();
  data_.reset(static_cast<std::byte*>(p), AlignedFree{});
  // The bytes after the last element up to the 64-byte boundary stay zero, as they always were,
  // for any vector loop that reads whole lines.
  const std::size_t end = (nbytes() + 63) / 64 * 64;
  std::memset(data_.get() + nbytes(), 0, (end == 0 ? 64 : end) - nbytes());
}

Tensor::Tensor(DType dtype, Shape shape) : Tensor(dtype, std::move(shape), Uninit{}) {
  std::memset(data_.get(), 0, nbytes());
}

Tensor Tensor::uninitialized(DType dtype, Shape shape) { return Tensor(dtype, std::move(shape), Uninit{}); }

Tensor Tensor::adopt(DType dtype, Shape shape, std::byte* data, std::shared_ptr<void> owner) {
  assert(reinterpret_cast<std::uintptr_t>(data) % 64 == 0);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  t.data_ = std::shared_ptr<std::byte>(std::move(owner), data);  // aliasing: owner's lifetime, our pointer
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = uninitialized(dtype_, shape_);
  if (nbytes()) std::memcpy(t.bytes(), bytes(), nbytes());
  return t;
}

double Tensor::get(std::int64_t i) const {
  switch (dtype_) {
    case DType::float32: return data<float>()[i];
    case DType::float64: return data<double>()[i];
    case DType::bfloat16: return bfloat16_bits_to_float(data<std::uint16_t>()[i]);
    case DType::float16: return float16_bits_to_float(data<std::uint16_t>()[i]);
  }
  return 0;
}

void Tensor::set(std::int64_t i, double v) {
  switch (dtype_) {
    case DType::float32: data<float>()[i] = static_cast<float>(v); break;
    case DType::float64: data<double>()[i] = v; break;
    case DType::bfloat16: data<std::uint16_t>()[i] = float_to_bfloat16_bits(static_cast<float>(v)); break;
    case DType::float16: data<std::uint16_t>()[i] = float_to_float16_bits(static_cast<float>(v)); break;
  }
}

Tensor Tensor::to(DType target) const {
  if (target == dtype_) return clone();
  Tensor t = uninitialized(target, shape_);  // every element is set below
  if (dtype_ == DType::float32 && target == DType::float64) {
    for (std::int64_t i = 0; i < numel_; ++i) t.data<double>()[i] = data<float>()[i];
  } else {
    for (std::int64_t i = 0; i < numel_; ++i) t.set(i, get(i));
  }
  return t;
}

void Tensor::reshape(Shape shape) {
  assert(shape_numel(shape) == numel_);
  shape_ = std::move(shape);
}

void Float32Scan::add(const float* p, std::size_t n) {
  std::size_t i = 0;
  float mf = max_abs;
  std::int64_t bad = 0;
#if defined(__SSE2__)
  // maxps(x, m) returns m when x is NaN, so NaN is skipped as fmax skips it (fmaxf was a libm
  // call per value: 5% of generate's CPU time); x != x counts the NaNs in the same pass.
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff));
  __m128 m0 = _mm_set1_ps(mf), m1 = _mm_set1_ps(mf);
  while (i + 8 <= n) {
    // Blocks of 2^24 values, so the 32-bit lane counters cannot overflow.
    const std::size_t end = i + std::min<std::size_t>((n - i) / 8 * 8, std::size_t{1} << 24);
    __m128i c0 = _mm_setzero_si128(), c1 = _mm_setzero_si128();
    for (; i < end; i += 8) {
      const __m128 a = _mm_loadu_ps(p + i), b = _mm_loadu_ps(p + i + 4);
      m0 = _mm_max_ps(_mm_and_ps(a, abs_mask), m0);
      m1 = _mm_max_ps(_mm_and_ps(b, abs_mask), m1);
      c0 = _mm_sub_epi32(c0, _mm_castps_si128(_mm_cmpunord_ps(a, a)));  // a NaN lane adds 1
      c1 = _mm_sub_epi32(c1, _mm_castps_si128(_mm_cmpunord_ps(b, b)));
    }
    alignas(16) std::int32_t c[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(c), c0);
    _mm_store_si128(reinterpret_cast<__m128i*>(c + 4), c1);
    for (auto v : c) bad += v;
  }
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, _mm_max_ps(m0, m1));
  for (float l : lanes) mf = std::fmax(mf, l);
#endif
  for (; i < n; ++i) {
    mf = std::fmax(mf, std::fabs(p[i]));
    bad += p[i] != p[i];
  }
  max_abs = mf;
  nans += bad;
}

std::optional<double> Float32Scan::finite_max() const {
  if (!std::isfinite(max_abs)) return std::nullopt;
  return static_cast<double>(max_abs);
}

std::optional<double> finite_max_abs(const Tensor& t) {
  if (t.dtype() == DType::float32) {
    Float32Scan scan;
    scan.add(t.data<float>(), static_cast<std::size_t>(t.numel()));
    return scan.finite_max();
  }
  double m = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) m = std::fmax(m, std::fabs(t.get(i)));
  if (!std::isfinite(m)) return std::nullopt;
  return m;
}

}  // namespace validate
