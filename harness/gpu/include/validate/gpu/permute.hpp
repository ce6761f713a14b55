#pragma once
// Layout conversion on the device, driven by exactly the description the CPU converter uses
// (validate/layout/permute.hpp): a strided gather into a dense C-order destination,
//     dst[i0, ..., i(r-1)] = src[offset + i0*stride[0] + ... + i(r-1)*stride[r-1]]
// strides in elements, negative for a flipped axis. So a Spec converts on the GPU through the same
// layout::to_layout_gather / from_layout_gather the CPU path takes, and the tests can hold the two
// to each other element for element.
//
// Kernels (chosen per call after size-1 axes are dropped and contiguous neighbours merged, as the
// CPU engine does):
//   copy   — the identity: cudaMemcpyAsync;
//   rows   — the source walks the destination's innermost axis with stride +1 or -1 (a flip):
//            each warp reads and writes consecutive elements, both sides coalesced;
//   tile   — a transpose: the source's unit-stride axis is another destination axis. A 32x32 tile
//            is read along the source's fast axis and written along the destination's, staged
//            through shared memory padded to 33 columns so the column reads hit 32 different banks
//            (for 2-, 4- and 8-byte elements);
//   planes — batched small planes: every entry of the outermost axis is one dense block of source
//            elements (a weight's 3x3 planes flipped or transposed; OIHW <-> OHWI's planes): a
//            block stages a group of whole planes, or a slab of one (contiguous, or in runs),
//            through shared memory, 16-byte loads in, 16-byte stores out;
//   gather — no unit-stride axis (sub-sampling, broadcast): one element per thread, coalesced
//   writes.
// rows and tile move 16 bytes per access when the sizes, strides, offset and pointers are multiples
// of 16 bytes (permute_wide.hpp), else one element. Rank <= 6 after simplification; element sizes
// 1, 2, 4 and 8 bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include <cuda_runtime_api.h>

#include "validate/core/result.hpp"
#include "validate/core/tensor.hpp"
#include "validate/layout/spec.hpp"

namespace validate::gpu {

enum class PermuteKernel { copy, rows, tile, gather, planes };
const char* kernel_name(PermuteKernel k);

// The gather after dropping size-1 axes and merging neighbours that stay contiguous in the source,
// and the kernel that will run it. Host-only; no device needed (the tests check the choice).
struct PermutePlan {
  Shape shape;                       // simplified destination shape (C order)
  std::vector<std::int64_t> stride;  // source stride per simplified axis
  std::int64_t offset = 0;
  PermuteKernel kernel = PermuteKernel::copy;
  int tile_axis = -1;  // tile: the simplified axis the source walks with stride +-1
  std::size_t elem_size = 4;
  // planes: the inner axis split into slabs (-1: whole planes), planes per block, slab width.
  int plane_m = -1;
  std::int64_t plane_group = 1, plane_chunk = 1;
  // planes in runs: the chunked axis is 1 (the destination's slowest inner axis, the source's
  // unit-stride one); each run of plane_chunk elements sits plane_run_stride apart in shared
  // memory.
  bool plane_runs = false;
  std::int64_t plane_run_stride = 0;
};
// elem_size matters to the planes kernel only (how many planes fit in shared memory).
PermutePlan plan_permute(const Shape& dst_shape, const std::vector<std::int64_t>& src_strides,
                         std::int64_t src_offset, std::size_t elem_size = 4);

// Device pointers; src and dst must not overlap. Asynchronous on `stream` (nullptr: the legacy
// default stream); errors are launch/configuration errors, named.
Status permute_copy(const void* src, void* dst, std::size_t elem_size, const Shape& dst_shape,
                    const std::vector<std::int64_t>& src_strides, std::int64_t src_offset,
                    cudaStream_t stream = nullptr);

// canonical (dense C order over canonical_shape) -> layout memory, and back. Same preconditions as
// layout::to_layout / from_layout (spec parsed against canonical_axes).
Status to_layout(const void* canonical, void* out, std::size_t elem_size,
                 const Shape& canonical_shape, std::string_view canonical_axes,
                 const layout::Spec& spec, cudaStream_t stream = nullptr);
Status from_layout(const void* in, void* canonical, std::size_t elem_size,
                   const Shape& canonical_shape, std::string_view canonical_axes,
                   const layout::Spec& spec, cudaStream_t stream = nullptr);

// One tensor from layout `from` to layout `to` in a single pass (no canonical intermediate).
Status convert_layout(const void* src, const layout::Spec& from, void* dst, const layout::Spec& to,
                      std::size_t elem_size, const Shape& canonical_shape,
                      std::string_view canonical_axes, cudaStream_t stream = nullptr);

// The gather that convert_layout runs: destination = `to` memory, source = `from` memory.
struct LayoutGather {
  Shape dst_shape;
  std::vector<std::int64_t> src_strides;
  std::int64_t src_offset = 0;
};
LayoutGather layout_to_layout_gather(const layout::Spec& from, const layout::Spec& to,
                                     const Shape& canonical_shape, std::string_view canonical_axes);

}  // namespace validate::gpu
