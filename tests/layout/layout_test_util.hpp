#pragma once
// Test helpers: an independent statement of the layout definition (docs/layouts.md, "The spec grammar"), written
// from the text rather than from the library's Placement, and pattern fills.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "validate/core/tensor.hpp"
#include "validate/layout/spec.hpp"

namespace validate::layout::test {

// Where canonical element `c` (multi-index) lands in layout memory, by the definition: the array's
// axes are spec.axes in that order; C order = last axis fastest, :F = first axis fastest; a flipped
// axis stores index i at size-1-i.
inline std::int64_t definition_offset(const Spec& spec, const std::string& axes, const Shape& shape,
                                      const std::vector<std::int64_t>& c) {
  const std::size_t r = axes.size();
  std::vector<std::int64_t> x(r), n(r);
  for (std::size_t j = 0; j < r; ++j) {
    const std::size_t a = axes.find(spec.axes[j]);
    n[j] = shape[a];
    x[j] = spec.flip.find(spec.axes[j]) != std::string::npos ? shape[a] - 1 - c[a] : c[a];
  }
  std::int64_t off = 0;
  if (spec.fortran) {
    for (std::size_t j = r; j-- > 0;) off = off * n[j] + x[j];
  } else {
    for (std::size_t j = 0; j < r; ++j) off = off * n[j] + x[j];
  }
  return off;
}

// Reference conversion, one element at a time by the definition.
inline std::vector<std::byte> definition_to_layout(const std::byte* canonical, std::size_t es, const Spec& spec,
                                                   const std::string& axes, const Shape& shape) {
  const std::int64_t n = shape_numel(shape);
  std::vector<std::byte> out(static_cast<std::size_t>(n) * es);
  std::vector<std::int64_t> c(shape.size(), 0);
  for (std::int64_t f = 0; f < n; ++f) {
    const std::int64_t off = definition_offset(spec, axes, shape, c);
    std::memcpy(out.data() + off * static_cast<std::int64_t>(es), canonical + f * static_cast<std::int64_t>(es), es);
    for (std::size_t a = shape.size(); a-- > 0;) {
      if (++c[a] < shape[a]) break;
      c[a] = 0;
    }
  }
  return out;
}

// Distinct bytes per element (index mixed with a salt), so any misplaced element shows.
inline std::vector<std::byte> pattern(std::int64_t n, std::size_t es, std::uint64_t salt = 0x9E3779B97F4A7C15ull) {
  std::vector<std::byte> v(static_cast<std::size_t>(n) * es);
  std::mt19937_64 rng(salt);
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint64_t x = static_cast<std::uint64_t>(i) * 0x100000001B3ull ^ rng();
    // The low bytes carry the index so that 2-byte elements of small tensors stay distinct.
    x = (x & ~std::uint64_t{0xFFFF}) | static_cast<std::uint64_t>(i & 0xFFFF);
    std::memcpy(v.data() + static_cast<std::size_t>(i) * es, &x, std::min<std::size_t>(es, 8));
  }
  return v;
}

}  // namespace validate::layout::test
