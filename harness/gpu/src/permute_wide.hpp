#pragma once
// The bandwidth-bound permute kernels' index arithmetic (permute.hpp lists when each runs), as
// host+device functions like permute_kernels.hpp: permute.cu's kernels loop over them, and
// tests/gpu runs them thread by thread on the CPU against the naive gather.
//
// What makes a layout copy reach memcpy's bandwidth: every global access 16 bytes wide and
// coalesced on both sides (a warp moves whole 128-byte lines), several independent 16-byte loads
// in flight per thread before any store (a load-then-store loop keeps one in flight and stalls on
// DRAM latency: ~40% of memcpy on an H200), no shared-memory bank conflicts, and cheap index
// arithmetic (multiply-shift division, not the 20-instruction integer divide).
#include <cstdint>
#include <cstring>

#include "permute_kernels.hpp"

namespace validate::gpu::kernels {

// One 16-byte access: V elements of T. Loaded and stored through this aligned type, nvcc emits
// one 128-bit instruction (as PyTorch's aligned_vector).
template <class T>
constexpr int kVec = static_cast<int>(16 / sizeof(T));
template <class T>
struct alignas(16) Pack {
  T v[kVec<T>];
};

VALIDATE_HD std::uint32_t umulhi32(std::uint32_t a, std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<std::uint32_t>((static_cast<std::uint64_t>(a) * b) >> 32);
#endif
}

// n / d by multiply and shift for 32-bit indices (n < 2^31: fits_int32 guarantees it), plain
// division for 64-bit ones.
template <class I>
struct Divider {
  I d = 1;
  std::uint32_t magic = 0;
  int shift = 0;
  Divider() = default;
  explicit Divider(I divisor) : d(divisor) {
    if constexpr (sizeof(I) == 4) {
      while ((std::uint64_t{1} << shift) < static_cast<std::uint64_t>(d)) ++shift;
      const std::uint64_t one = 1;
      magic = static_cast<std::uint32_t>(
          ((one << 32) * ((one << shift) - static_cast<std::uint64_t>(d))) /
              static_cast<std::uint64_t>(d) +
          1);
    }
  }
  VALIDATE_HD I div(I n) const {
    if constexpr (sizeof(I) == 4) {
      const std::uint32_t u = static_cast<std::uint32_t>(n);
      return static_cast<I>((umulhi32(u, magic) + u) >> shift);
    } else {
      return n / d;
    }
  }
};

// ---- rows, 16 bytes wide: dst[d + j] = src[s + j * step], step = +1 or -1 ----
// Aligned when the destination's 16-byte chunks map onto 16-byte source chunks: step +1 needs
// s - d, step -1 needs s + d + 1 to be multiples of V (the launcher checks, with the pointers'
// alignment). Each thread loads kRowUnroll packs before it stores any.
constexpr int kRowUnroll = 4;

template <class T, class I>
struct WideRowsArgs {
  const T* src;
  T* dst;
  Axes<I> outer;
  Divider<I> chunks_div;  // by chunks_per_row
  I offset, row_len, step, chunks_per_row, items;
  static constexpr I kChunk = static_cast<I>(kRowThreads) * kRowUnroll * kVec<T>;
};

template <class T, class I>
VALIDATE_HD void wide_rows_item(const WideRowsArgs<T, I>& a, I item, int t) {
  constexpr int V = kVec<T>;
  const I row = a.chunks_div.div(item), chunk = item - row * a.chunks_per_row;
  I s = a.offset, d = 0;
  decompose(row, a.outer, s, d);
  const I begin = chunk * a.kChunk;
  const I end = begin + a.kChunk < a.row_len ? begin + a.kChunk : a.row_len;
  // Row starts are multiples of V in the destination (row_len % V == 0 is required), so chunk j
  // of the row is a 16-byte chunk of dst; its source pack starts at s + j (step +1) or s - j -
  // V + 1 (step -1, then reversed in registers).
  const I first = begin + static_cast<I>(t) * V;
  constexpr I kStride = static_cast<I>(kRowThreads) * V;
  Pack<T> buf[kRowUnroll] = {};
  VALIDATE_UNROLL
  for (int u = 0; u < kRowUnroll; ++u) {
    const I j = first + static_cast<I>(u) * kStride;
    if (j < end)
      buf[u] = *reinterpret_cast<const Pack<T>*>(a.src + (a.step > 0 ? s + j : s - j - (V - 1)));
  }
  VALIDATE_UNROLL
  for (int u = 0; u < kRowUnroll; ++u) {
    const I j = first + static_cast<I>(u) * kStride;
    if (j >= end) continue;
    Pack<T> out = buf[u];
    if (a.step < 0) {
      VALIDATE_UNROLL
      for (int k = 0; k < V; ++k) out.v[k] = buf[u].v[V - 1 - k];
    }
    *reinterpret_cast<Pack<T>*>(a.dst + d + j) = out;
  }
}

// ---- tile, 16 bytes wide: a transpose of [l][q] planes (q the source's unit-stride axis, l the
// destination's) in tiles of E = 16 V elements a side, 256 threads ----
// Load: thread (lb, c) reads the V x V micro-block rows l = lb V + k, columns q = c V .. c V + V-1
// as V packs — lanes take consecutive c, so each source row is read in 256 contiguous bytes —
// transposes it in registers and stores V packs into shared memory, row q, pack column lb.
// Store: thread (qq, lb) copies pack (q, lb) of shared memory to destination row q, pack lb —
// lanes take consecutive lb: 256 contiguous bytes per row. Shared memory is swizzled: pack column
// lb of row q sits at lb ^ ((q / V) % 8), so the load phase's 8 lanes of a quarter warp (rows
// c V + k for 8 consecutive c) hit 8 different 16-byte bank groups, and the store phase's reads of
// one row are a permutation of its packs: no bank conflicts on either side.
constexpr int kWideTilePacks = 16;  // packs per tile edge
constexpr int kWideTileThreads = kWideTilePacks * kWideTilePacks;

template <class T, class I>
struct WideTileArgs {
  const T* src;
  T* dst;
  Axes<I> outer;
  Divider<I> tiles_l_div, tiles_q_div;
  I offset, n_q, n_l, s_l, d_q, tiles_q, tiles_l, items;
  static constexpr I kEdge = static_cast<I>(kWideTilePacks) * kVec<T>;
};

template <class T>
VALIDATE_HD int swizzle(int q, int lb) {
  return lb ^ ((q / kVec<T>)&7);
}

template <class T, class I>
VALIDATE_HD TileOrigin<I> wide_tile_origin(const WideTileArgs<T, I>& a, I item) {
  const I rest = a.tiles_l_div.div(item);
  const I tl = item - rest * a.tiles_l;
  const I outer = a.tiles_q_div.div(rest);
  const I tq = rest - outer * a.tiles_q;
  TileOrigin<I> o{a.offset, 0, tq * a.kEdge, tl * a.kEdge};
  decompose(outer, a.outer, o.s, o.d);
  return o;
}

// smem: kEdge rows (q) of kWideTilePacks packs (l).
template <class T, class I>
VALIDATE_HD void wide_tile_load(const WideTileArgs<T, I>& a, const TileOrigin<I>& o, Pack<T>* smem,
                                int tid) {
  constexpr int V = kVec<T>;
  const int c = tid % kWideTilePacks, lb = tid / kWideTilePacks;
  const I q = o.q0 + static_cast<I>(c) * V, l = o.l0 + static_cast<I>(lb) * V;
  if (q >= a.n_q || l >= a.n_l) return;  // n_q, n_l are multiples of V: whole packs
  Pack<T> in[V];
  VALIDATE_UNROLL
  for (int k = 0; k < V; ++k)
    in[k] = *reinterpret_cast<const Pack<T>*>(a.src + o.s + (l + k) * a.s_l + q);
  VALIDATE_UNROLL
  for (int j = 0; j < V; ++j) {
    Pack<T> out;
    VALIDATE_UNROLL
    for (int k = 0; k < V; ++k) out.v[k] = in[k].v[j];
    const int row = c * V + j;
    smem[row * kWideTilePacks + swizzle<T>(row, lb)] = out;
  }
}

template <class T, class I>
VALIDATE_HD void wide_tile_store(const WideTileArgs<T, I>& a, const TileOrigin<I>& o,
                                 const Pack<T>* smem, int tid) {
  constexpr int V = kVec<T>;
  const int lb = tid % kWideTilePacks, qq = tid / kWideTilePacks;
  const I l = o.l0 + static_cast<I>(lb) * V;
  if (l >= a.n_l) return;
  VALIDATE_UNROLL
  for (int k = 0; k < V; ++k) {
    const int row = qq + k * kWideTilePacks;
    const I q = o.q0 + row;
    if (q >= a.n_q) break;
    *reinterpret_cast<Pack<T>*>(a.dst + o.d + q * a.d_q + l) =
        smem[row * kWideTilePacks + swizzle<T>(row, lb)];
  }
}

// ---- planes: many small planes, or slabs of one, staged whole through shared memory ----
// The plan is [batch][inner...] where every batch entry is one dense block of P source elements
// (a weight's 3 x 3 planes, a [I][HW] plane of OIHW -> OHWI). A unit — `group` consecutive planes,
// or one plane's slab of `chunk` values of its slowest source axis m — occupies one contiguous
// source range: it is copied into shared memory with 16-byte loads, then the destination is
// written in the unit's destination order with 16-byte stores, each element read from shared
// memory where the source put it. kPlaneBytes bounds a unit: 24 KiB lets 8 blocks (2048 threads)
// share an SM's 228 KiB, each with several 16-byte loads in flight.
constexpr std::int64_t kPlaneBytes = 24 * 1024 - 16;  // 8 blocks of 256 threads per SM
constexpr int kPlaneThreads = 256;

template <class I>
struct PlanesArgsBase {
  int rank = 0;                                // enumeration axes, destination order, batch first
  I ext[kMaxRank] = {};                        // per unit: batch = group, m = chunk
  Divider<I> div[kMaxRank];                    // by ext
  I sstr[kMaxRank] = {}, dstr[kMaxRank] = {};  // source and destination strides
  int m = -1;  // enumeration index of the chunked axis; -1: whole planes
  I n_batch = 1, n_m = 1, group = 1, chunk = 1, units_m = 1, units = 0;
  Divider<I> units_m_div;
  I offset = 0, plane = 0;
  I inner_neg = 0;  // sum of min(0, (ext - 1) * stride) over the inner axes other than m
  bool contiguous_dst = false;  // whole planes: the unit's destination is one contiguous range
  bool vec_load = false, vec_store = false;
  I batch_stride = 0, m_stride = 0;  // source strides of the batch and the chunked axis
  // Runs (plan_planes says when): the chunked axis is the destination's slowest inner axis and the
  // source's unit-stride one, so a unit's source is run_count runs of `chunk` elements, one per
  // combination of the other inner axes (run_axes, plan order). Shared memory holds them compacted,
  // run r at r * run_stride, and sstr holds those shared-memory strides instead of the source's.
  bool runs = false;
  Axes<I> run_axes;
  I run_count = 0, run_stride = 0;
};

template <class T, class I>
struct PlanesArgs : PlanesArgsBase<I> {
  const T* src = nullptr;
  T* dst = nullptr;
};

template <class I>
struct PlaneUnit {
  I src_base, dst_base, lo, len, count;  // count: elements the unit enumerates
  I n_group, n_chunk;                    // this unit's real batch and m extents
  int shift;                             // lo % V: shared memory keeps the source's alignment
};

template <class T, class I>
VALIDATE_HD PlaneUnit<I> plane_unit(const PlanesArgs<T, I>& a, I unit) {
  const I bg = a.units_m_div.div(unit);
  const I jc = unit - bg * a.units_m;
  const I b0 = bg * a.group, j0 = jc * a.chunk;
  PlaneUnit<I> u;
  u.n_group = a.n_batch - b0 < a.group ? a.n_batch - b0 : a.group;
  u.n_chunk = a.n_m - j0 < a.chunk ? a.n_m - j0 : a.chunk;
  const I sb = a.batch_stride, sm = a.m_stride;
  const I dm = a.m >= 0 ? a.dstr[a.m] : 0;
  u.src_base = a.offset + b0 * sb + j0 * sm;
  u.dst_base = b0 * a.plane + j0 * dm;
  if (a.runs) {  // shared memory starts with the unit's first element
    u.lo = u.src_base;
    u.len = a.run_count * u.n_chunk;
    u.count = 1;
    for (int k = 0; k < a.rank; ++k) u.count *= a.ext[k];
    u.shift = 0;
    return u;
  }
  u.lo = u.src_base + a.inner_neg + (sb < 0 ? (u.n_group - 1) * sb : 0) +
         (sm < 0 ? (u.n_chunk - 1) * sm : 0);
  u.len = a.m >= 0 ? u.n_chunk * (a.plane / a.n_m) : u.n_group * a.plane;
  u.count = 1;
  for (int k = 0; k < a.rank; ++k) u.count *= a.ext[k];
  u.shift = static_cast<int>(u.lo % kVec<T>);
  return u;
}

template <class T, class I>
VALIDATE_HD void planes_load(const PlanesArgs<T, I>& a, const PlaneUnit<I>& u, T* smem, int tid,
                             int threads) {
  constexpr int V = kVec<T>;
  if (!a.vec_load) {
    for (I e = tid; e < u.len; e += threads) smem[u.shift + e] = a.src[u.lo + e];
    return;
  }
  // Packs of the aligned range around [lo, lo + len); the partial first and last ones by element
  // (a whole pack there could read outside the tensor). Several packs in flight per thread.
  const I packs = (u.shift + u.len + V - 1) / V;
  const I first = u.lo - u.shift;
  for (I k0 = tid; k0 < packs; k0 += static_cast<I>(threads) * kRowUnroll) {
    Pack<T> buf[kRowUnroll] = {};
    VALIDATE_UNROLL
    for (int r = 0; r < kRowUnroll; ++r) {
      const I k = k0 + static_cast<I>(r) * threads;
      const I g = first + k * V;
      if (k < packs && g >= u.lo && g + V <= u.lo + u.len)
        buf[r] = *reinterpret_cast<const Pack<T>*>(a.src + g);
    }
    VALIDATE_UNROLL
    for (int r = 0; r < kRowUnroll; ++r) {
      const I k = k0 + static_cast<I>(r) * threads;
      if (k >= packs) break;
      const I g = first + k * V;
      if (g >= u.lo && g + V <= u.lo + u.len) {
        *reinterpret_cast<Pack<T>*>(smem + k * V) = buf[r];
      } else {
        VALIDATE_UNROLL
        for (int i = 0; i < V; ++i)
          if (g + i >= u.lo && g + i < u.lo + u.len) smem[k * V + i] = a.src[g + i];
      }
    }
  }
}

// Runs: run r of the unit (its source offset from run_axes) to shared memory at r * run_stride,
// 16-byte packs when aligned (vec_load), kRowUnroll of them in flight per thread.
template <class T, class I>
VALIDATE_HD void planes_load_runs(const PlanesArgs<T, I>& a, const PlaneUnit<I>& u, T* smem,
                                  int tid, int threads) {
  constexpr int V = kVec<T>;
  const I per_run = a.vec_load ? u.n_chunk / V : u.n_chunk;  // packs, or elements
  const I items = a.run_count * per_run;
  const I width = a.vec_load ? V : 1;
  for (I k0 = tid; k0 < items; k0 += static_cast<I>(threads) * kRowUnroll) {
    Pack<T> buf[kRowUnroll] = {};
    I at[kRowUnroll] = {};
    VALIDATE_UNROLL
    for (int r = 0; r < kRowUnroll; ++r) {
      const I k = k0 + static_cast<I>(r) * threads;
      if (k >= items) continue;
      const I run = k / per_run, j = (k - run * per_run) * width;
      I s = u.src_base, unused = 0;
      decompose(run, a.run_axes, s, unused);
      at[r] = run * a.run_stride + j;
      if (a.vec_load)
        buf[r] = *reinterpret_cast<const Pack<T>*>(a.src + s + j);
      else
        buf[r].v[0] = a.src[s + j];
    }
    VALIDATE_UNROLL
    for (int r = 0; r < kRowUnroll; ++r) {
      const I k = k0 + static_cast<I>(r) * threads;
      if (k >= items) continue;
      if (a.vec_load)
        *reinterpret_cast<Pack<T>*>(smem + at[r]) = buf[r];
      else
        smem[at[r]] = buf[r].v[0];
    }
  }
}

// Coordinates of enumeration index e of a unit, and the offsets they give.
// The loops run over kMaxRank with the unused axes skipped, so that they unroll and c stays in
// registers.
template <class T, class I>
VALIDATE_HD void plane_coords(const PlanesArgs<T, I>& a, I e, I* c, I& s, I& d) {
  s = 0;
  d = 0;
  VALIDATE_UNROLL
  for (int k = kMaxRank - 1; k >= 0; --k) {
    if (k >= a.rank) continue;
    const I next = a.div[k].div(e);
    c[k] = e - next * a.ext[k];
    e = next;
    s += c[k] * a.sstr[k];
    d += c[k] * a.dstr[k];
  }
}

// Whether coordinates c lie inside this unit's real extents (the last group or chunk is short).
template <class T, class I>
VALIDATE_HD bool plane_inside(const PlanesArgs<T, I>& a, const PlaneUnit<I>& u, const I* c) {
  bool in = c[0] < u.n_group;
  VALIDATE_UNROLL
  for (int k = 1; k < kMaxRank; ++k)
    if (k == a.m) in = in && c[k] < u.n_chunk;
  return in;
}

// The next enumeration index's coordinates (an odometer: no division).
template <class T, class I>
VALIDATE_HD void plane_advance(const PlanesArgs<T, I>& a, I* c, I& s, I& d) {
  VALIDATE_UNROLL
  for (int k = kMaxRank - 1; k >= 0; --k) {
    if (k >= a.rank) continue;
    ++c[k];
    s += a.sstr[k];
    d += a.dstr[k];
    if (c[k] < a.ext[k] || k == 0) return;
    s -= c[k] * a.sstr[k];
    d -= c[k] * a.dstr[k];
    c[k] = 0;
  }
}

template <class T, class I>
VALIDATE_HD void planes_store(const PlanesArgs<T, I>& a, const PlaneUnit<I>& u, const T* smem,
                              int tid, int threads) {
  constexpr int V = kVec<T>;
  const I base = u.src_base - u.lo + u.shift;  // smem index of the unit's first element
  if (!a.vec_store) {
    for (I e = tid; e < u.count; e += threads) {
      I c[kMaxRank] = {}, s, d;
      plane_coords(a, e, c, s, d);
      if (plane_inside(a, u, c)) a.dst[u.dst_base + d] = smem[base + s];
    }
    return;
  }
  // V consecutive enumeration indices are V consecutive destination elements: within one row of
  // the destination's innermost axis (its extent is a multiple of V), or anywhere in a whole-plane
  // unit, whose destination is contiguous.
  for (I e0 = static_cast<I>(tid) * V; e0 < u.count; e0 += static_cast<I>(threads) * V) {
    I c[kMaxRank] = {}, s, d;
    plane_coords(a, e0, c, s, d);
    if (!plane_inside(a, u, c)) continue;
    const I d0 = d;
    Pack<T> out = {};
    int got = 0;
    VALIDATE_UNROLL
    for (int i = 0; i < V; ++i) {
      if (got < i || !plane_inside(a, u, c)) continue;  // stopped at the end of the unit
      out.v[i] = smem[base + s];
      ++got;
      plane_advance(a, c, s, d);
    }
    if (got == V) {
      *reinterpret_cast<Pack<T>*>(a.dst + u.dst_base + d0) = out;
    } else {  // the end of a short last group
      for (int i = 0; i < got; ++i) a.dst[u.dst_base + d0 + i] = out.v[i];
    }
  }
}

// ---- host: when the 16-byte kernels apply, and their arguments ----

inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

template <class T>
bool wide_rows_ok(const PermutePlan& p, const void* src, const void* dst) {
  constexpr std::int64_t V = kVec<T>;
  const std::size_t r = p.shape.size();
  const std::int64_t step = p.stride[r - 1], len = p.shape[r - 1];
  if (!aligned16(src) || !aligned16(dst) || len % V != 0) return false;
  // Every row's source start s must line up with its destination start (a multiple of V).
  auto lines_up = [&](std::int64_t s) { return (step > 0 ? s : s + 1) % V == 0; };
  if (!lines_up(p.offset)) return false;
  for (std::size_t a = 0; a + 1 < r; ++a)
    if (p.stride[a] % V != 0) return false;
  return true;
}

template <class T, class I>
WideRowsArgs<T, I> wide_rows_args(const PermutePlan& p, const void* src, void* dst) {
  const int r = static_cast<int>(p.shape.size());
  WideRowsArgs<T, I> a;
  a.src = static_cast<const T*>(src);
  a.dst = static_cast<T*>(dst);
  a.outer = axes_except<I>(p, r - 1, -1);
  a.offset = static_cast<I>(p.offset);
  a.row_len = static_cast<I>(p.shape[r - 1]);
  a.step = static_cast<I>(p.stride[r - 1]);
  a.chunks_per_row = (a.row_len + a.kChunk - 1) / a.kChunk;
  a.chunks_div = Divider<I>(a.chunks_per_row);
  a.items = static_cast<I>(plan_numel(p) / p.shape[r - 1]) * a.chunks_per_row;
  return a;
}

// 1-byte elements keep the one-element tile: a 256 x 256 tile would need 64 KiB of shared memory.
template <class T>
bool wide_tile_ok(const PermutePlan& p, const void* src, const void* dst) {
  constexpr std::int64_t V = kVec<T>;
  if (sizeof(T) == 1) return false;
  const int q = p.tile_axis, l = static_cast<int>(p.shape.size()) - 1;
  if (!aligned16(src) || !aligned16(dst) || p.stride[q] != 1) return false;
  if (p.shape[q] % V != 0 || p.shape[l] % V != 0 || p.offset % V != 0) return false;
  for (int a = 0; a <= l; ++a)
    if (a != q && p.stride[a] % V != 0) return false;
  return true;
}

template <class T, class I>
WideTileArgs<T, I> wide_tile_args(const PermutePlan& p, const void* src, void* dst) {
  const int q = p.tile_axis, l = static_cast<int>(p.shape.size()) - 1;
  const auto ds = dense_strides(p.shape);
  WideTileArgs<T, I> a;
  a.src = static_cast<const T*>(src);
  a.dst = static_cast<T*>(dst);
  a.outer = axes_except<I>(p, q, l);
  a.offset = static_cast<I>(p.offset);
  a.n_q = static_cast<I>(p.shape[q]);
  a.n_l = static_cast<I>(p.shape[l]);
  a.s_l = static_cast<I>(p.stride[l]);
  a.d_q = static_cast<I>(ds[q]);
  a.tiles_q = (a.n_q + a.kEdge - 1) / a.kEdge;
  a.tiles_l = (a.n_l + a.kEdge - 1) / a.kEdge;
  a.tiles_q_div = Divider<I>(a.tiles_q);
  a.tiles_l_div = Divider<I>(a.tiles_l);
  a.items = static_cast<I>(plan_numel(p) / (p.shape[q] * p.shape[l])) * a.tiles_q * a.tiles_l;
  return a;
}

template <class T, class I>
PlanesArgs<T, I> planes_args(const PermutePlan& p, const void* src, void* dst) {
  constexpr std::int64_t V = kVec<T>;
  const int r = static_cast<int>(p.shape.size());
  const auto ds = dense_strides(p.shape);
  PlanesArgs<T, I> a;
  a.src = static_cast<const T*>(src);
  a.dst = static_cast<T*>(dst);
  a.rank = r;
  a.m = p.plane_m;
  a.n_batch = static_cast<I>(p.shape[0]);
  a.group = static_cast<I>(a.m < 0 ? p.plane_group : 1);
  a.n_m = static_cast<I>(a.m < 0 ? 1 : p.shape[static_cast<std::size_t>(a.m)]);
  a.chunk = static_cast<I>(a.m < 0 ? 1 : p.plane_chunk);
  a.units_m = (a.n_m + a.chunk - 1) / a.chunk;
  a.units = ((a.n_batch + a.group - 1) / a.group) * a.units_m;
  a.units_m_div = Divider<I>(a.units_m);
  a.offset = static_cast<I>(p.offset);
  a.plane = static_cast<I>(ds[0]);
  for (int k = 0; k < r; ++k) {
    const auto ku = static_cast<std::size_t>(k);
    a.ext[k] = k == 0 ? a.group : k == a.m ? a.chunk : static_cast<I>(p.shape[ku]);
    a.div[k] = Divider<I>(a.ext[k]);
    a.sstr[k] = static_cast<I>(p.stride[ku]);
    a.dstr[k] = static_cast<I>(ds[ku]);
    if (k > 0 && k != a.m && p.stride[ku] < 0) a.inner_neg += (a.ext[k] - 1) * a.sstr[k];
  }
  a.batch_stride = static_cast<I>(p.stride[0]);
  a.m_stride = a.m >= 0 ? static_cast<I>(p.stride[static_cast<std::size_t>(a.m)]) : 0;
  if (p.plane_runs) {
    // Shared memory: run r (the other inner axes, plan order) at r * run_stride, element i of the
    // chunk at + i. The enumeration reads it there: axis 1 at stride 1, the others at run_stride
    // times their dense stride among themselves; the batch contributes nothing (one plane).
    a.runs = true;
    a.run_stride = static_cast<I>(p.plane_run_stride);
    a.run_count = static_cast<I>(ds[0] / p.shape[1]);
    a.run_axes = axes_except<I>(p, 0, 1);
    I dense = 1;
    for (int k = r - 1; k >= 0; --k) {
      if (k == 0)
        a.sstr[k] = 0;
      else if (k == 1)
        a.sstr[k] = 1;
      else {
        a.sstr[k] = a.run_stride * dense;
        dense *= static_cast<I>(p.shape[static_cast<std::size_t>(k)]);
      }
    }
    a.inner_neg = 0;
    a.contiguous_dst = true;
    bool aligned = aligned16(src) && p.offset % V == 0 && p.stride[0] % V == 0 &&
                   p.shape[1] % V == 0 && p.plane_chunk % V == 0;
    for (int k = 2; k < r; ++k) aligned = aligned && p.stride[static_cast<std::size_t>(k)] % V == 0;
    a.vec_load = aligned;
    // Unit starts b P + j0 R, j0 a multiple of the chunk: aligned when P and the chunk are.
    a.vec_store = aligned16(dst) && ds[0] % V == 0 && p.plane_chunk % V == 0;
    return a;
  }
  a.contiguous_dst = a.m < 0;
  a.vec_load = aligned16(src);
  a.vec_store = aligned16(dst) && (a.m < 0 ? (p.plane_group * ds[0]) % V == 0
                                           : p.plane_chunk % V == 0 &&
                                                 p.shape[static_cast<std::size_t>(a.m)] % V == 0);
  return a;
}

// Shared memory of one planes block: the largest unit, plus up to V - 1 elements of alignment.
inline std::size_t planes_smem_bytes(const PermutePlan& p) {
  const std::int64_t plane = plan_numel(p) / p.shape[0];
  if (p.plane_runs)
    return static_cast<std::size_t>(plane / p.shape[1] * p.plane_run_stride) * p.elem_size;
  const std::int64_t len =
      p.plane_m < 0 ? p.plane_group * plane
                    : p.plane_chunk * (plane / p.shape[static_cast<std::size_t>(p.plane_m)]);
  const auto bytes = static_cast<std::size_t>(len) * p.elem_size + 16;
  return (bytes + 15) / 16 * 16;
}

}  // namespace validate::gpu::kernels
