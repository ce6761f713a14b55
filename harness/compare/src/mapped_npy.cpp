// Memory-mapped .npy files for the comparison, and scalar reads of their elements.
#include "comparer.hpp"

#include <cstring>
#include <limits>
#include <optional>
#include <utility>

namespace validate::compare::detail {

Result<Mapped> open_npy(const std::string& path) {
  auto f = MappedFile::open(path);
  if (!f) return f.status();
  f->advise_sequential();
  return open_npy(std::move(*f));
}

Result<Mapped> open_npy(MappedFile mapped) {
  std::optional<MappedFile> f(std::move(mapped));
  const std::string path = f->path();
  auto h = npy::parse_header(f->data(), f->size(), path);
  if (!h) return h.status();
  if (h->fortran_order && h->shape.size() > 1)
    return Error{
        path +
        ": stored in Fortran order; reference and run tensors must be C order (canonical layout)"};
  return Mapped{std::move(*f), std::move(*h)};
}

float scalar_value(const ArrayView& v) {
  if (v.numel < 1) return std::numeric_limits<float>::quiet_NaN();
  if (v.storage == DType::float64) {
    double d;
    std::memcpy(&d, v.data, 8);
    return static_cast<float>(d);
  }
  if (v.storage == DType::float16) {
    std::uint16_t h;
    std::memcpy(&h, v.data, 2);
    return float16_bits_to_float(h);
  }
  float f;
  std::memcpy(&f, v.data, 4);
  return f;
}

float value_at(const ArrayView& v, std::int64_t i) {
  ArrayView one = v;
  one.data = v.data + i * static_cast<std::int64_t>(dtype_size(v.storage));
  one.numel = 1;
  return scalar_value(one);
}

}  // namespace validate::compare::detail
