#pragma once
// The one primitive every layout conversion is made of: a strided gather into a dense C-order
// destination,
//     dst[i0, ..., i(r-1)] = src[offset + i0*stride[0] + ... + i(r-1)*stride[r-1]]
// with strides in elements, possibly negative (a flipped axis walks backwards from `offset`).
// Axis permutations, C vs Fortran order and flips are all just strides, so the diagnosis ("what if
// H and W were swapped / the order were F / the kernel were flipped") calls this directly.
//
// Why a dedicated engine rather than an odometer loop: converting a 100 MB activation element by
// element runs at a tenth of memcpy. Here size-1 axes are dropped and neighbours that stay
// contiguous merged (NCHW -> NHWC becomes [N][HW][C]), then one of three kernels runs:
//   - rows: the destination's innermost axis is a run in the source (or a reversed run): memcpy,
//     or an AVX2 reversed copy — the identity and pure flips;
//   - tiles: a transpose between the destination's innermost axis and the axis the source walks
//     fastest, in cache-line x cache-line tiles staged through L1 and transposed in registers
//     (8x8 float, 4x4 double, 16x16 half), walked so that each side keeps ~16 sequential streams,
//     with software prefetch;
//   - table: short destination rows (a 3x3 kernel plane) copied ~1024 elements at a time through a
//     precomputed offset table.
// Large tensors are split across threads, and destinations larger than the caches are written
// with non-temporal stores. docs/layouts.md ("Performance") has the measurements.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "validate/core/tensor.hpp"

namespace validate::layout {

struct PermuteOptions {
  int threads = 0;  // 0: std::thread::hardware_concurrency() above min_parallel_bytes, else 1
  std::size_t min_parallel_bytes = std::size_t{4} << 20;  // below this a thread costs more than it saves
  // From this size on, transposed tiles are written with non-temporal stores: an output this much
  // larger than the caches would be evicted before anyone reads it, and skipping the
  // read-for-ownership saves a third of the memory traffic.
  std::size_t min_streaming_bytes = std::size_t{32} << 20;
};

// dst: numel(dst_shape) * elem_size bytes, dense C order over dst_shape. src must hold every element
// the strides reach (the caller's invariant, asserted in debug builds only for the lowest one).
// elem_size: any size; 1, 2, 4 and 8 (and 16) bytes take the fast kernels. src and dst must not overlap.
void permute_copy(const std::byte* src, std::byte* dst, std::size_t elem_size, const Shape& dst_shape,
                  const std::vector<std::int64_t>& src_strides, std::int64_t src_offset,
                  const PermuteOptions& options = {});

// The same contract, one element at a time through an odometer: the reference the tests and the
// benchmark compare the engine with. Obviously correct, never fast.
void permute_copy_naive(const std::byte* src, std::byte* dst, std::size_t elem_size,
                        const Shape& dst_shape, const std::vector<std::int64_t>& src_strides,
                        std::int64_t src_offset);

// The same gather with size-1 axes dropped and neighbours that stay contiguous in the source
// merged (outer stride == inner stride * inner size; true of reversed runs too), so NCHW -> NHWC
// becomes a batch of 2-D transposes [N][HW][C] and the identity a single run. Every element lands
// where the original gather puts it. Empty shape: one element (a scalar or an all-ones shape).
// Both permute engines plan from it: this one and validate::gpu's (gpu/src/permute_plan.cpp).
struct SimpleGather {
  Shape shape;                        // simplified destination shape (C order)
  std::vector<std::int64_t> strides;  // source stride per simplified axis
  std::int64_t offset = 0;
};
SimpleGather simplify_gather(const Shape& dst_shape, const std::vector<std::int64_t>& src_strides,
                             std::int64_t src_offset);

// Dense C-order strides of a shape, in elements ([2,3,4] -> [12,4,1]).
std::vector<std::int64_t> c_strides(const Shape& shape);

}  // namespace validate::layout
