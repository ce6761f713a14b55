// Device kernels of validate::gpu::permute_copy (permute.hpp says which runs when). The index
// arithmetic lives in permute_kernels.hpp, shared with the CPU-side test of it.
#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "permute_kernels.hpp"
#include "permute_wide.hpp"
#include "validate/gpu/check.hpp"
#include "validate/gpu/permute.hpp"

namespace validate::gpu {

namespace {

using namespace kernels;

constexpr unsigned kMaxBlocks = 1u << 16;  // grid-stride loops beyond this

template <class T, class I>
__global__ void gather_kernel(GatherArgs<T, I> a) {
  const I step = static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x);
  for (I i = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x);
       i < a.n; i += step)
    gather_one(a, i);
}

template <class T, class I>
__global__ void rows_kernel(RowsArgs<T, I> a) {
  for (I item = static_cast<I>(blockIdx.x); item < a.items; item += static_cast<I>(gridDim.x))
    rows_item(a, item, static_cast<int>(threadIdx.x));
}

template <class T, class I>
__global__ void tile_kernel(TileArgs<T, I> a) {
  __shared__ T tile[kTile][kTile + 1];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  for (I item = static_cast<I>(blockIdx.x); item < a.items; item += static_cast<I>(gridDim.x)) {
    const TileOrigin<I> o = tile_origin(a, item);
    tile_load(a, o, tile, tx, ty);
    __syncthreads();
    tile_store(a, o, tile, tx, ty);
    __syncthreads();  // the next item overwrites the tile
  }
}

template <class T, class I>
__global__ void __launch_bounds__(kRowThreads) wide_rows_kernel(WideRowsArgs<T, I> a) {
  for (I item = static_cast<I>(blockIdx.x); item < a.items; item += static_cast<I>(gridDim.x))
    wide_rows_item(a, item, static_cast<int>(threadIdx.x));
}

template <class T, class I>
__global__ void __launch_bounds__(kWideTileThreads) wide_tile_kernel(WideTileArgs<T, I> a) {
  __shared__ Pack<T> tile[WideTileArgs<T, I>::kEdge * kWideTilePacks];
  const int tid = static_cast<int>(threadIdx.x);
  for (I item = static_cast<I>(blockIdx.x); item < a.items; item += static_cast<I>(gridDim.x)) {
    const TileOrigin<I> o = wide_tile_origin(a, item);
    wide_tile_load(a, o, tile, tid);
    __syncthreads();
    wide_tile_store(a, o, tile, tid);
    __syncthreads();
  }
}

// 5 blocks per SM: at most 51 registers (48 used for 4-byte elements, no spills with 32-bit
// indices but for 1-byte elements), 1280 threads with kRowUnroll loads each in flight, and
// 5 x 24 KiB of shared memory.
template <class T, class I>
__global__ void __launch_bounds__(kPlaneThreads, 5) planes_kernel(PlanesArgs<T, I> a) {
  extern __shared__ __align__(16) unsigned char planes_smem[];
  T* smem = reinterpret_cast<T*>(planes_smem);
  const int tid = static_cast<int>(threadIdx.x);
  for (I unit = static_cast<I>(blockIdx.x); unit < a.units; unit += static_cast<I>(gridDim.x)) {
    const PlaneUnit<I> u = plane_unit(a, unit);
    if (a.runs)
      planes_load_runs(a, u, smem, tid, kPlaneThreads);
    else
      planes_load(a, u, smem, tid, kPlaneThreads);
    __syncthreads();
    planes_store(a, u, smem, tid, kPlaneThreads);
    __syncthreads();
  }
}

unsigned blocks_for(std::int64_t items) {
  return static_cast<unsigned>(
      std::max<std::int64_t>(1, std::min<std::int64_t>(items, kMaxBlocks)));
}

template <class T, class I>
Status launch(const PermutePlan& p, const void* src, void* dst, cudaStream_t stream) {
  switch (p.kernel) {
    case PermuteKernel::copy:
      VALIDATE_GPU_TRY(cudaMemcpyAsync(dst, static_cast<const T*>(src) + p.offset,
                                       static_cast<std::size_t>(plan_numel(p)) * sizeof(T),
                                       cudaMemcpyDeviceToDevice, stream));
      return Status::ok();
    case PermuteKernel::rows: {
      if (wide_rows_ok<T>(p, src, dst)) {
        const auto a = wide_rows_args<T, I>(p, src, dst);
        wide_rows_kernel<T, I><<<blocks_for(a.items), kRowThreads, 0, stream>>>(a);
        break;
      }
      const auto a = rows_args<T, I>(p, src, dst);
      rows_kernel<T, I><<<blocks_for(a.items), kRowThreads, 0, stream>>>(a);
      break;
    }
    case PermuteKernel::tile: {
      if constexpr (sizeof(T) > 1) {
        if (wide_tile_ok<T>(p, src, dst)) {
          const auto a = wide_tile_args<T, I>(p, src, dst);
          wide_tile_kernel<T, I><<<blocks_for(a.items), kWideTileThreads, 0, stream>>>(a);
          break;
        }
      }
      const auto a = tile_args<T, I>(p, src, dst);
      tile_kernel<T, I><<<blocks_for(a.items), dim3(kTile, kTileRows), 0, stream>>>(a);
      break;
    }
    case PermuteKernel::planes: {
      const auto a = planes_args<T, I>(p, src, dst);
      planes_kernel<T, I><<<blocks_for(a.units), kPlaneThreads, planes_smem_bytes(p), stream>>>(a);
      break;
    }
    case PermuteKernel::gather: {
      const auto a = gather_args<T, I>(p, src, dst);
      gather_kernel<T, I><<<blocks_for((a.n + 255) / 256), 256, 0, stream>>>(a);
      break;
    }
  }
  // Launch errors (bad configuration, no device) surface here; faults in the kernel surface at
  // the caller's next synchronising call, which is checked too.
  VALIDATE_GPU_TRY(cudaGetLastError());
  return Status::ok();
}

template <class T>
Status launch_sized(const PermutePlan& p, const void* src, void* dst, cudaStream_t stream) {
  return fits_int32(p) ? launch<T, std::int32_t>(p, src, dst, stream)
                       : launch<T, std::int64_t>(p, src, dst, stream);
}

}  // namespace

Status permute_copy(const void* src, void* dst, std::size_t elem_size, const Shape& dst_shape,
                    const std::vector<std::int64_t>& src_strides, std::int64_t src_offset,
                    cudaStream_t stream) {
  if (dst_shape.size() != src_strides.size())
    return Error{fmt::format("gpu::permute_copy: {} strides for a rank-{} destination",
                             src_strides.size(), dst_shape.size())};
  for (auto s : dst_shape) {
    if (s < 0) return Error{"gpu::permute_copy: negative extent in " + shape_to_string(dst_shape)};
    if (s == 0) return Status::ok();  // nothing to move
  }
  const PermutePlan p = plan_permute(dst_shape, src_strides, src_offset, elem_size);
  if (p.shape.size() > static_cast<std::size_t>(kMaxRank))
    return Error{
        fmt::format("gpu::permute_copy: rank {} after merging contiguous axes of {}; the kernels "
                    "take at most {}",
                    p.shape.size(), shape_to_string(dst_shape), kMaxRank)};
  switch (elem_size) {
    case 1:
      return launch_sized<std::uint8_t>(p, src, dst, stream);
    case 2:
      return launch_sized<std::uint16_t>(p, src, dst, stream);
    case 4:
      return launch_sized<std::uint32_t>(p, src, dst, stream);
    case 8:
      return launch_sized<std::uint64_t>(p, src, dst, stream);
    default:
      return Error{fmt::format("gpu::permute_copy: element size {} (supported: 1, 2, 4, 8 bytes)",
                               elem_size)};
  }
}

}  // namespace validate::gpu
