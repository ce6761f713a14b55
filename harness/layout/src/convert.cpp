#include "validate/layout/convert.hpp"

#include <cassert>

namespace validate::layout {

Placement placement(const Spec& spec, std::string_view axes, const Shape& shape) {
  assert(spec.axes.size() == axes.size() && shape.size() == axes.size());
  const std::size_t r = axes.size();
  std::vector<int> perm(r);  // layout axis j holds canonical axis perm[j]
  std::vector<bool> flipped(r, false);
  for (std::size_t j = 0; j < r; ++j) {
    const auto a = axes.find(spec.axes[j]);
    assert(a != std::string_view::npos);
    perm[j] = static_cast<int>(a);
  }
  for (char c : spec.flip) flipped[axes.find(c)] = true;
  // C order: the written order is slowest -> fastest; Fortran: the reverse.
  std::vector<int> memory_axes;
  for (std::size_t t = 0; t < r; ++t) memory_axes.push_back(perm[spec.fortran ? r - 1 - t : t]);
  Placement p = placement(shape, std::move(memory_axes), std::move(flipped));
  p.layout_shape.clear();
  for (int a : perm) p.layout_shape.push_back(shape[static_cast<std::size_t>(a)]);
  return p;
}

Placement placement(const Shape& shape, std::vector<int> memory_axes, std::vector<bool> flipped) {
  assert(memory_axes.size() == shape.size() && flipped.size() == shape.size());
  Placement p;
  p.canonical_shape = shape;
  p.memory_axes = std::move(memory_axes);
  p.flipped = std::move(flipped);
  for (int a : p.memory_axes) p.memory_shape.push_back(shape[static_cast<std::size_t>(a)]);
  p.layout_shape = p.memory_shape;
  p.stride.assign(shape.size(), 0);
  const auto ms = c_strides(p.memory_shape);
  for (std::size_t t = 0; t < ms.size(); ++t) p.stride[static_cast<std::size_t>(p.memory_axes[t])] = ms[t];
  return p;
}

bool same_offsets(const Placement& a, const Placement& b) {
  if (a.canonical_shape != b.canonical_shape) return false;
  for (std::size_t i = 0; i < a.canonical_shape.size(); ++i)
    if (a.canonical_shape[i] > 1 && (a.stride[i] != b.stride[i] || a.flipped[i] != b.flipped[i])) return false;
  return true;
}

bool is_canonical(const Placement& p) {
  const auto cs = c_strides(p.canonical_shape);
  for (std::size_t i = 0; i < p.canonical_shape.size(); ++i)
    if (p.canonical_shape[i] > 1 && (p.stride[i] != cs[i] || p.flipped[i])) return false;
  return true;
}

std::int64_t Placement::offset_of(const std::int64_t* idx) const {
  std::int64_t off = 0;
  for (std::size_t a = 0; a < stride.size(); ++a)
    off += stride[a] * (flipped[a] ? canonical_shape[a] - 1 - idx[a] : idx[a]);
  return off;
}

Shape shape_in_layout(const Spec& spec, std::string_view axes, const Shape& shape) {
  return placement(spec, axes, shape).layout_shape;
}

// dst = layout memory; walking it in memory order visits canonical axis memory_axes[t] at
// position t. A flipped axis reads the canonical tensor backwards from its last index.
Gather to_layout_gather(const Placement& p) {
  Gather g;
  const auto cs = c_strides(p.canonical_shape);
  for (int ai : p.memory_axes) {
    const auto a = static_cast<std::size_t>(ai);
    g.dst_shape.push_back(p.canonical_shape[a]);
    g.src_strides.push_back(p.flipped[a] ? -cs[a] : cs[a]);
    if (p.flipped[a]) g.src_offset += (p.canonical_shape[a] - 1) * cs[a];
  }
  return g;
}

// dst = canonical C order; canonical axis a sits at stride[a] in layout memory.
Gather from_layout_gather(const Placement& p) {
  Gather g;
  g.dst_shape = p.canonical_shape;
  for (std::size_t a = 0; a < p.stride.size(); ++a) {
    g.src_strides.push_back(p.flipped[a] ? -p.stride[a] : p.stride[a]);
    if (p.flipped[a]) g.src_offset += (p.canonical_shape[a] - 1) * p.stride[a];
  }
  return g;
}

void to_layout(const std::byte* canonical, std::byte* out, std::size_t elem_size, const Shape& shape,
               std::string_view axes, const Spec& spec, const PermuteOptions& options) {
  const Gather g = to_layout_gather(placement(spec, axes, shape));
  permute_copy(canonical, out, elem_size, g.dst_shape, g.src_strides, g.src_offset, options);
}

void from_layout(const std::byte* in, std::byte* canonical, std::size_t elem_size, const Shape& shape,
                 std::string_view axes, const Spec& spec, const PermuteOptions& options) {
  const Gather g = from_layout_gather(placement(spec, axes, shape));
  permute_copy(in, canonical, elem_size, g.dst_shape, g.src_strides, g.src_offset, options);
}

Tensor to_layout(const Tensor& canonical, std::string_view axes, const Spec& spec, const PermuteOptions& options) {
  Tensor out(canonical.dtype(), shape_in_layout(spec, axes, canonical.shape()));
  to_layout(canonical.bytes(), out.bytes(), dtype_size(canonical.dtype()), canonical.shape(), axes, spec, options);
  return out;
}

Tensor from_layout(const Tensor& in, std::string_view axes, const Shape& canonical_shape, const Spec& spec,
                   const PermuteOptions& options) {
  assert(in.numel() == shape_numel(canonical_shape));
  Tensor out(in.dtype(), canonical_shape);
  from_layout(in.bytes(), out.bytes(), dtype_size(in.dtype()), canonical_shape, axes, spec, options);
  return out;
}

}  // namespace validate::layout
