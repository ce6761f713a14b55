// Host side of the device permute: simplification, kernel choice, and the Spec -> gather
// descriptions. No device code here, so the choice is testable without a GPU.
#include <cassert>
#include <cstdlib>

#include "permute_kernels.hpp"
#include "validate/gpu/permute.hpp"
#include "validate/layout/convert.hpp"
#include "validate/layout/permute.hpp"

namespace validate::gpu {

const char* kernel_name(PermuteKernel k) {
  switch (k) {
    case PermuteKernel::copy:
      return "copy";
    case PermuteKernel::rows:
      return "rows";
    case PermuteKernel::tile:
      return "tile";
    case PermuteKernel::gather:
      return "gather";
  }
  return "?";
}

PermutePlan plan_permute(const Shape& dst_shape, const std::vector<std::int64_t>& src_strides,
                         std::int64_t src_offset) {
  assert(dst_shape.size() == src_strides.size());
  // The CPU engine's simplification (validate/layout/permute.hpp), so both engines see one plan.
  layout::SimpleGather g = layout::simplify_gather(dst_shape, src_strides, src_offset);
  PermutePlan p;
  p.shape = std::move(g.shape);
  p.stride = std::move(g.strides);
  p.offset = g.offset;
  if (p.shape.empty()) {  // a scalar or all-ones shape: one element
    p.shape = {1};
    p.stride = {1};
  }
  const std::size_t r = p.shape.size();
  const std::int64_t inner = p.stride[r - 1];
  if (r == 1 && inner == 1) {
    p.kernel = PermuteKernel::copy;
  } else if (std::llabs(inner) == 1 && p.shape[r - 1] >= 128) {
    p.kernel = PermuteKernel::rows;
  } else {
    p.kernel = PermuteKernel::gather;
    if (std::llabs(inner) != 1) {
      // The source's unit-stride axis, if any, becomes the tile's other side: a transpose. Unless
      // both sides are under half a tile (the 3x3 planes of a weight, H and W swapped): a block
      // would move 9 of its 1024 slots per item, and the gather keeps its warps' reads within a
      // few lines (on an H200, OIHW -> HWIO:F+flip=HW ran at 1% of memcpy through the tile).
      for (std::size_t a = r - 1; a-- > 0;)
        if (std::llabs(p.stride[a]) == 1) {
          if (p.shape[a] < kernels::kTile / 2 && p.shape[r - 1] < kernels::kTile / 2) break;
          p.kernel = PermuteKernel::tile;
          p.tile_axis = static_cast<int>(a);
          break;
        }
    }
  }
  return p;
}

LayoutGather layout_to_layout_gather(const layout::Spec& from, const layout::Spec& to,
                                     const Shape& canonical_shape,
                                     std::string_view canonical_axes) {
  const auto pf = layout::placement(from, canonical_axes, canonical_shape);
  const auto pt = layout::placement(to, canonical_axes, canonical_shape);
  LayoutGather g;
  // Walk `to` memory slowest -> fastest; canonical axis a then sits at stride pf.stride[a] in
  // `from`. An axis flipped in exactly one of the two layouts is walked backwards; flipped in both,
  // forwards.
  for (int ai : pt.memory_axes) {
    const auto a = static_cast<std::size_t>(ai);
    const bool reversed = pf.flipped[a] != pt.flipped[a];
    g.dst_shape.push_back(canonical_shape[a]);
    g.src_strides.push_back(reversed ? -pf.stride[a] : pf.stride[a]);
    if (reversed) g.src_offset += (canonical_shape[a] - 1) * pf.stride[a];
  }
  return g;
}

Status to_layout(const void* canonical, void* out, std::size_t elem_size,
                 const Shape& canonical_shape, std::string_view canonical_axes,
                 const layout::Spec& spec, cudaStream_t stream) {
  const auto g = layout::to_layout_gather(layout::placement(spec, canonical_axes, canonical_shape));
  return permute_copy(canonical, out, elem_size, g.dst_shape, g.src_strides, g.src_offset, stream);
}

Status from_layout(const void* in, void* canonical, std::size_t elem_size,
                   const Shape& canonical_shape, std::string_view canonical_axes,
                   const layout::Spec& spec, cudaStream_t stream) {
  const auto g =
      layout::from_layout_gather(layout::placement(spec, canonical_axes, canonical_shape));
  return permute_copy(in, canonical, elem_size, g.dst_shape, g.src_strides, g.src_offset, stream);
}

Status convert_layout(const void* src, const layout::Spec& from, void* dst, const layout::Spec& to,
                      std::size_t elem_size, const Shape& canonical_shape,
                      std::string_view canonical_axes, cudaStream_t stream) {
  const auto g = layout_to_layout_gather(from, to, canonical_shape, canonical_axes);
  return permute_copy(src, dst, elem_size, g.dst_shape, g.src_strides, g.src_offset, stream);
}

}  // namespace validate::gpu
