#pragma once
// Exact conversion between a tensor's canonical layout (C order over its canonical axes, e.g. NCHW)
// and a layout spec: a permutation of the bytes, never arithmetic, so a bfloat16 or a NaN payload
// survives unchanged. Built on permute_copy (permute.hpp).
//
// Preconditions (programming errors, asserted): `spec` was parsed against `canonical_axes`
// (parse_spec), and the canonical shape has one size per canonical axis.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "validate/core/tensor.hpp"
#include "validate/layout/permute.hpp"
#include "validate/layout/spec.hpp"

namespace validate::layout {

// Where a layout puts each canonical element, derived once from (spec, axes, canonical shape).
struct Placement {
  Shape layout_shape;                   // sizes in the spec's axis order as written: HWIO:F -> [H,W,I,O]
  Shape memory_shape;                   // sizes slowest -> fastest in memory: HWIO:F -> [O,I,W,H]
  std::vector<int> memory_axes;         // canonical axis at each memory position (slowest first)
  std::vector<std::int64_t> stride;     // per canonical axis: element stride in layout memory (> 0)
  std::vector<bool> flipped;            // per canonical axis: stored reversed
  Shape canonical_shape;

  // Element offset in layout memory of the canonical multi-index `idx` (one entry per axis).
  std::int64_t offset_of(const std::int64_t* idx) const;
};
Placement placement(const Spec& spec, std::string_view canonical_axes, const Shape& canonical_shape);
// The same, named by memory order instead of a spec: canonical axis memory_axes[t] at memory
// position t (slowest first, C order, so layout_shape == memory_shape), and a flip per canonical
// axis. For callers that enumerate readings of a tensor's bytes rather than parse specs (the
// diagnosis tries every axis order and flip); placement(spec, ...) is this with the spec's order.
Placement placement(const Shape& canonical_shape, std::vector<int> memory_axes, std::vector<bool> flipped);

// Whether two placements of one canonical shape put every element at the same offset: they agree
// on every axis longer than 1 (a size-1 axis has no stride that matters, so with batch 1 NCHW:F
// and a C<->W swap are the same bytes).
bool same_offsets(const Placement& a, const Placement& b);
// Whether `p` puts every element where the canonical layout (C order, nothing flipped) does.
bool is_canonical(const Placement& p);

// The shape in the layout's axis order as written (what case.json reports): HWIO:F -> [H,W,I,O].
Shape shape_in_layout(const Spec& spec, std::string_view canonical_axes, const Shape& canonical_shape);

// canonical (dense C order over canonical_shape) -> layout memory. Buffers must not overlap.
void to_layout(const std::byte* canonical, std::byte* out, std::size_t elem_size, const Shape& canonical_shape,
               std::string_view canonical_axes, const Spec& spec, const PermuteOptions& options = {});
// layout memory -> canonical. Exactly inverts to_layout.
void from_layout(const std::byte* in, std::byte* canonical, std::size_t elem_size, const Shape& canonical_shape,
                 std::string_view canonical_axes, const Spec& spec, const PermuteOptions& options = {});

// Tensor forms. to_layout returns a tensor whose shape is shape_in_layout() and whose bytes are in
// the layout's memory order — for a ":F" spec that is Fortran order, so the Tensor's own (C-order)
// indexing does NOT apply to it; it is a byte container to write to disk. from_layout takes such
// bytes (any shape with the right element count) and returns the canonical tensor.
Tensor to_layout(const Tensor& canonical, std::string_view canonical_axes, const Spec& spec,
                 const PermuteOptions& options = {});
Tensor from_layout(const Tensor& in, std::string_view canonical_axes, const Shape& canonical_shape,
                   const Spec& spec, const PermuteOptions& options = {});

// The gather arguments of each direction, for callers that drive permute_copy themselves
// (the diagnosis tries many specs on one buffer without materialising Tensors).
struct Gather {
  Shape dst_shape;
  std::vector<std::int64_t> src_strides;
  std::int64_t src_offset = 0;
};
Gather to_layout_gather(const Placement& p);    // src canonical, dst layout memory
Gather from_layout_gather(const Placement& p);  // src layout memory, dst canonical

}  // namespace validate::layout
