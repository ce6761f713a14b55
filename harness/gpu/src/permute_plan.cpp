// Host side of the device permute: simplification, kernel choice, and the Spec -> gather
// descriptions. No device code here, so the choice is testable without a GPU.
#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <numeric>

#include "permute_kernels.hpp"
#include "permute_wide.hpp"
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
    case PermuteKernel::planes:
      return "planes";
  }
  return "?";
}

namespace {

bool plan_gathered_planes(PermutePlan& p, std::int64_t plane, std::size_t m, std::int64_t elem,
                          std::int64_t v);
bool plan_planes_in_runs(PermutePlan& p, std::int64_t plane, std::int64_t elem, std::int64_t v);

// Batched planes: the outermost axis steps over whole dense blocks of P source elements (its
// stride is +-P and the inner strides, sorted, are the dense strides of a permutation of the inner
// axes, flips allowed). When the destination's innermost axis is read at an odd source stride:
// whole planes if one fits in shared memory, else slabs of the plane's slowest source axis m, only
// when m is the destination's innermost axis and a slab keeps at least 32 of its elements (whole
// 128-byte lines for 4-byte elements). Otherwise, runs (plan_planes_in_runs), if they apply.
bool plan_planes(PermutePlan& p) {
  const std::size_t r = p.shape.size();
  if (r < 2) return false;
  std::int64_t plane = 1;
  for (std::size_t a = 1; a < r; ++a) plane *= p.shape[a];
  if (std::llabs(p.stride[0]) != plane) return false;
  std::vector<std::size_t> inner(r - 1);
  std::iota(inner.begin(), inner.end(), std::size_t{1});
  std::sort(inner.begin(), inner.end(), [&](std::size_t x, std::size_t y) {
    return std::llabs(p.stride[x]) < std::llabs(p.stride[y]);
  });
  std::int64_t dense = 1;
  for (std::size_t a : inner) {
    if (std::llabs(p.stride[a]) != dense) return false;
    dense *= p.shape[a];
  }
  if (p.elem_size != 1 && p.elem_size != 2 && p.elem_size != 4 && p.elem_size != 8) return false;
  const auto elem = static_cast<std::int64_t>(p.elem_size);
  const std::int64_t v = 16 / elem;
  // The store phase reads shared memory at the source stride of the destination's innermost axis,
  // one element per lane: an odd stride spreads a warp over the banks, an even one piles it onto
  // a few (NHWC -> NCHW reads at stride C). Those take runs (below) or the tile, which is padded.
  if (std::llabs(p.stride[r - 1]) % 2 == 1 && plan_gathered_planes(p, plane, inner.back(), elem, v))
    return true;
  return plan_planes_in_runs(p, plane, elem, v);
}

// Whole planes, or slabs of the slowest source axis m (plan_planes).
bool plan_gathered_planes(PermutePlan& p, std::int64_t plane, std::size_t m, std::int64_t elem,
                          std::int64_t v) {
  const std::size_t r = p.shape.size();
  if (plane * elem <= kernels::kPlaneBytes) {
    p.plane_m = -1;
    p.plane_group = std::min(p.shape[0], kernels::kPlaneBytes / (plane * elem));
    // A group of whole planes is 16-byte aligned in the destination when group * P is a
    // multiple of V.
    const std::int64_t align = v / std::gcd(plane, v);
    if (p.plane_group >= align) p.plane_group -= p.plane_group % align;
    return true;
  }
  const std::int64_t row = plane / p.shape[m];
  std::int64_t chunk = std::min(p.shape[m], kernels::kPlaneBytes / (row * elem));
  if (m != r - 1 || chunk < 32) return false;
  if (chunk >= v) chunk -= chunk % v;
  p.plane_m = static_cast<int>(m);
  p.plane_chunk = chunk;
  return true;
}

// Runs: axis 1 (the destination's slowest inner axis) is the source's unit-stride axis, as in
// OHWI -> OIHW ([O][I][HW] read at strides (P, 1, I)). A unit is one plane's slab of `chunk` values
// of axis 1: R = P / n1 source runs of `chunk` contiguous elements, one contiguous destination
// range. Each run sits run_stride elements apart in shared memory, run_stride * elem = 16 modulo
// 128 bytes, so the store phase's lanes (consecutive destination elements: consecutive runs, then
// the next element of each) spread over the banks. For kernel windows: under 32 runs.
bool plan_planes_in_runs(PermutePlan& p, std::int64_t plane, std::int64_t elem, std::int64_t v) {
  if (p.shape.size() < 3 || p.stride[1] != 1) return false;
  const std::int64_t runs = plane / p.shape[1], line = 128 / elem;
  // A warp's V-element stores then span a few runs at most; with 32 runs or more its lanes step V
  // runs apart and pile onto a few banks whatever the stride (NCHW -> NHWC, C runs): the tile.
  if (runs >= 32) return false;
  std::int64_t chunk = std::min(p.shape[1], kernels::kPlaneBytes / (runs * elem) - line);
  if (chunk >= v) chunk -= chunk % v;
  // Runs under 32 elements leave most of each 128-byte line unread, unless they are the whole axis.
  if (chunk < 1 || (chunk < 32 && chunk < p.shape[1])) return false;
  std::int64_t stride = chunk;
  while ((stride * elem) % 128 != 16) ++stride;
  if (runs * stride * elem > kernels::kPlaneBytes) return false;
  p.plane_runs = true;
  p.plane_m = 1;
  p.plane_group = 1;
  p.plane_chunk = chunk;
  p.plane_run_stride = stride;
  return true;
}

}  // namespace

PermutePlan plan_permute(const Shape& dst_shape, const std::vector<std::int64_t>& src_strides,
                         std::int64_t src_offset, std::size_t elem_size) {
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
  p.elem_size = elem_size;
  const std::size_t r = p.shape.size();
  const std::int64_t inner = p.stride[r - 1];
  if (r == 1 && inner == 1) {
    p.kernel = PermuteKernel::copy;
  } else if (std::llabs(inner) == 1 && p.shape[r - 1] >= 128) {
    p.kernel = PermuteKernel::rows;
  } else if (plan_planes(p)) {
    p.kernel = PermuteKernel::planes;
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
