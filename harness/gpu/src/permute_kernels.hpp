#pragma once
// The index arithmetic of the device permute kernels, written once as host+device functions: the
// __global__ kernels in permute.cu call them per thread, and tests/gpu calls the very same
// functions on the CPU, thread by thread, against the naive gather — so the indexing is proven on
// machines without a GPU, and only the launch itself needs one.
#include <cstdint>
#include <vector>

#include "validate/gpu/permute.hpp"

#if defined(__CUDACC__)
#define VALIDATE_HD __host__ __device__ __forceinline__
#else
#define VALIDATE_HD inline
#endif

// Fixed-count loops over per-thread arrays must unroll, or nvcc puts the arrays (and kernel
// parameter arrays indexed by a loop counter) in local memory.
#if defined(__CUDA_ARCH__)
#define VALIDATE_UNROLL _Pragma("unroll")
#else
#define VALIDATE_UNROLL
#endif

namespace validate::gpu::kernels {

constexpr int kMaxRank = 6;
constexpr int kTile = 32;     // tile edge: one warp wide
constexpr int kTileRows = 8;  // threads per tile column; each moves kTile / kTileRows elements
constexpr int kRowThreads = 256;
constexpr int kRowChunk = kRowThreads * 8;  // elements of one row handled by one block pass

// Passed by value (kernel parameter space): no device allocation for the description.
template <class I>
struct Axes {
  int rank = 0;
  I shape[kMaxRank] = {};
  I src_stride[kMaxRank] = {};
  I dst_stride[kMaxRank] = {};
};

// Adds the source and destination offsets of linear index `linear` over `ax` (C order).
template <class I>
VALIDATE_HD void decompose(I linear, const Axes<I>& ax, I& src, I& dst) {
  VALIDATE_UNROLL
  for (int k = kMaxRank - 1; k >= 0; --k) {
    if (k >= ax.rank) continue;
    const I c = linear % ax.shape[k];
    linear /= ax.shape[k];
    src += c * ax.src_stride[k];
    dst += c * ax.dst_stride[k];
  }
}

template <class T, class I>
struct GatherArgs {
  const T* src;
  T* dst;
  Axes<I> ax;
  I offset, n;
};
// gather: destination element i.
template <class T, class I>
VALIDATE_HD void gather_one(const GatherArgs<T, I>& a, I i) {
  I s = a.offset, d = 0;
  decompose(i, a.ax, s, d);
  a.dst[i] = a.src[s];
}

template <class T, class I>
struct RowsArgs {
  const T* src;
  T* dst;
  Axes<I> outer;  // every axis but the innermost
  I offset, row_len, step, chunks_per_row, items;
};
// rows: work item (row, chunk), thread `t` of kRowThreads.
template <class T, class I>
VALIDATE_HD void rows_item(const RowsArgs<T, I>& a, I item, int t) {
  const I row = item / a.chunks_per_row, chunk = item % a.chunks_per_row;
  I s = a.offset, d = 0;
  decompose(row, a.outer, s, d);
  const I begin = chunk * kRowChunk;
  const I end = begin + kRowChunk < a.row_len ? begin + kRowChunk : a.row_len;
  for (I j = begin + static_cast<I>(t); j < end; j += kRowThreads)
    a.dst[d + j] = a.src[s + j * a.step];
}

template <class T, class I>
struct TileArgs {
  const T* src;
  T* dst;
  Axes<I> outer;  // every axis but q and l
  I offset, n_q, n_l, s_q, s_l, d_q, tiles_q, tiles_l, items;
};
template <class I>
struct TileOrigin {
  I s, d, q0, l0;
};
template <class T, class I>
VALIDATE_HD TileOrigin<I> tile_origin(const TileArgs<T, I>& a, I item) {
  const I tl = item % a.tiles_l;
  const I rest = item / a.tiles_l;
  const I tq = rest % a.tiles_q;
  TileOrigin<I> o{a.offset, 0, tq * kTile, tl * kTile};
  decompose(rest / a.tiles_q, a.outer, o.s, o.d);
  return o;
}
// Load phase: threadIdx.x (tx) walks q, the source's unit-stride axis — coalesced reads — and
// stores tile[l][q].
template <class T, class I>
VALIDATE_HD void tile_load(const TileArgs<T, I>& a, const TileOrigin<I>& o, T (*tile)[kTile + 1],
                           int tx, int ty) {
  const I q = o.q0 + tx;
  for (int j = ty; j < kTile; j += kTileRows) {
    const I l = o.l0 + j;
    if (q < a.n_q && l < a.n_l) tile[j][tx] = a.src[o.s + q * a.s_q + l * a.s_l];
  }
}
// Store phase: tx walks l, the destination's unit-stride axis — coalesced writes — reading
// tile[l][q] down a column. The +1 column of padding makes that read stride 33 elements: 33
// words apart for 4-byte elements, 16.5 for 2-byte, 66 for 8-byte (served per half-warp), each of
// which puts a warp's reads in distinct banks.
template <class T, class I>
VALIDATE_HD void tile_store(const TileArgs<T, I>& a, const TileOrigin<I>& o,
                            const T (*tile)[kTile + 1], int tx, int ty) {
  const I l = o.l0 + tx;
  for (int j = ty; j < kTile; j += kTileRows) {
    const I q = o.q0 + j;
    if (q < a.n_q && l < a.n_l) a.dst[o.d + q * a.d_q + l] = tile[tx][j];
  }
}

// ---- host: the arguments of each kernel from a plan ----

inline std::vector<std::int64_t> dense_strides(const Shape& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (std::size_t a = shape.size() - 1; a-- > 0;) s[a] = s[a + 1] * shape[a + 1];
  return s;
}

template <class I>
Axes<I> axes_except(const PermutePlan& p, int skip1, int skip2) {
  const auto ds = dense_strides(p.shape);
  Axes<I> ax;
  for (int a = 0; a < static_cast<int>(p.shape.size()); ++a) {
    if (a == skip1 || a == skip2) continue;
    ax.shape[ax.rank] = static_cast<I>(p.shape[a]);
    ax.src_stride[ax.rank] = static_cast<I>(p.stride[a]);
    ax.dst_stride[ax.rank] = static_cast<I>(ds[a]);
    ++ax.rank;
  }
  return ax;
}

inline std::int64_t plan_numel(const PermutePlan& p) {
  std::int64_t n = 1;
  for (auto s : p.shape) n *= s;
  return n;
}

template <class T, class I>
GatherArgs<T, I> gather_args(const PermutePlan& p, const void* src, void* dst) {
  return {static_cast<const T*>(src), static_cast<T*>(dst), axes_except<I>(p, -1, -1),
          static_cast<I>(p.offset), static_cast<I>(plan_numel(p))};
}

template <class T, class I>
RowsArgs<T, I> rows_args(const PermutePlan& p, const void* src, void* dst) {
  const int r = static_cast<int>(p.shape.size());
  const I len = static_cast<I>(p.shape[r - 1]);
  const I chunks = (len + kRowChunk - 1) / kRowChunk;
  return {static_cast<const T*>(src),
          static_cast<T*>(dst),
          axes_except<I>(p, r - 1, -1),
          static_cast<I>(p.offset),
          len,
          static_cast<I>(p.stride[r - 1]),
          chunks,
          static_cast<I>(plan_numel(p) / p.shape[r - 1]) * chunks};
}

template <class T, class I>
TileArgs<T, I> tile_args(const PermutePlan& p, const void* src, void* dst) {
  const int q = p.tile_axis, l = static_cast<int>(p.shape.size()) - 1;
  const auto ds = dense_strides(p.shape);
  TileArgs<T, I> a{static_cast<const T*>(src),
                   static_cast<T*>(dst),
                   axes_except<I>(p, q, l),
                   static_cast<I>(p.offset),
                   static_cast<I>(p.shape[q]),
                   static_cast<I>(p.shape[l]),
                   static_cast<I>(p.stride[q]),
                   static_cast<I>(p.stride[l]),
                   static_cast<I>(ds[q]),
                   0,
                   0,
                   0};
  a.tiles_q = (a.n_q + kTile - 1) / kTile;
  a.tiles_l = (a.n_l + kTile - 1) / kTile;
  a.items = static_cast<I>(plan_numel(p) / (p.shape[q] * p.shape[l])) * a.tiles_q * a.tiles_l;
  return a;
}

// True when every index the kernels compute fits in int32 with headroom (then they use 32-bit
// arithmetic: 64-bit division costs several times more).
inline bool fits_int32(const PermutePlan& p) {
  std::int64_t hi = p.offset, lo = p.offset;
  for (std::size_t a = 0; a < p.shape.size(); ++a) {
    const std::int64_t reach = (p.shape[a] - 1) * p.stride[a];
    (reach > 0 ? hi : lo) += reach;
  }
  constexpr std::int64_t kMax = (std::int64_t{1} << 30) - 1;
  return plan_numel(p) < kMax && hi < kMax && lo >= 0;
}

}  // namespace validate::gpu::kernels
