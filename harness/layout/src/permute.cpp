#include "validate/layout/permute.hpp"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "permute_plan.hpp"
#include "permute_simd.hpp"

namespace validate::layout {

// The kernels; permute.hpp describes how one is chosen, permute_copy (below) does the choosing.
namespace detail {

// ---- rows: the destination's innermost axis is a run in the source (stride +1 / -1) or strided.

template <class T>
void copy_row(const T* s, T* d, std::int64_t len, std::int64_t stride, bool stream) {
  if (stride == 1) {
    std::memcpy(static_cast<void*>(d), static_cast<const void*>(s), static_cast<std::size_t>(len) * sizeof(T));
  } else if (stride == -1) {
#if VALIDATE_LAYOUT_X86
    if constexpr (sizeof(T) >= 2) {
      if (have_avx2()) return copy_reversed_avx2(s, d, len, stream);
    }
#endif
    for (std::int64_t j = 0; j < len; ++j) d[j] = s[-j];
  } else {
    for (std::int64_t j = 0; j < len; ++j) d[j] = s[j * stride];
  }
}

template <class T>
void run_rows(const Plan& p, const T* src, T* dst, int threads) {
  const std::size_t l = p.n.size() - 1;
  std::vector<std::size_t> axes(l);
  for (std::size_t a = 0; a < l; ++a) axes[a] = a;
  Outer outer(p, axes);
  const std::int64_t rows = outer.count(), len = p.n[l], stride = p.s[l];
  // Few long rows (the identity is one): cut rows into chunks so every thread gets work.
  const std::int64_t per_row =
      (threads <= 1 || rows >= 4 * threads) ? 1 : std::min<std::int64_t>(len, (4 * threads + rows - 1) / rows);
  const std::int64_t chunk = (len + per_row - 1) / per_row;
  parallel_units(rows * per_row, threads, [&](std::int64_t b, std::int64_t e) {
    Outer o = outer;
    std::int64_t row = b / per_row;
    o.seek(row);
    for (std::int64_t u = b; u < e; ++u) {
      if (u / per_row != row) {
        row = u / per_row;
        o.next();
      }
      const std::int64_t j0 = (u % per_row) * chunk, j1 = std::min(len, j0 + chunk);
      if (j0 < j1) copy_row(src + o.src + j0 * stride, dst + o.dst + j0, j1 - j0, stride, p.stream);
    }
    if (p.stream) store_fence();
  });
}

// ---- tiles: a blocked 2-D transpose between the destination's innermost axis l and the axis k the
// source walks fastest, in tiles of one cache line by one cache line (run_tiles picks the walk).

// d[i*dk + j] = s[i*sk + j*sl] for i < nk, j < nl; k advances a source line at a time.
template <class T>
void block_generic(const T* s, T* d, std::int64_t nk, std::int64_t nl, std::int64_t sk, std::int64_t sl,
                   std::int64_t dk) {
  constexpr std::int64_t kLine = 64 / sizeof(T) > 0 ? 64 / sizeof(T) : 1;
  for (std::int64_t i0 = 0; i0 < nk; i0 += kLine) {
    const std::int64_t i1 = std::min(nk, i0 + kLine);
    for (std::int64_t j = 0; j < nl; ++j) {
      const T* sj = s + j * sl;
      for (std::int64_t i = i0; i < i1; ++i) d[i * dk + j] = sj[i * sk];
    }
  }
}

template <class T>
void block(const T* s, T* d, std::int64_t nk, std::int64_t nl, std::int64_t sk, std::int64_t sl, std::int64_t dk,
           bool stream) {
#if VALIDATE_LAYOUT_X86
  if ((sk == 1 || sk == -1) && have_avx2()) {
    if constexpr (sizeof(T) == 4) {
      return sk == 1 ? block_simd<T, Transpose8x8x32<false>>(s, d, nk, nl, sk, sl, dk, stream)
                     : block_simd<T, Transpose8x8x32<true>>(s, d, nk, nl, sk, sl, dk, stream);
    } else if constexpr (sizeof(T) == 8) {
      return sk == 1 ? block_simd<T, Transpose4x4x64<false>>(s, d, nk, nl, sk, sl, dk, stream)
                     : block_simd<T, Transpose4x4x64<true>>(s, d, nk, nl, sk, sl, dk, stream);
    } else if constexpr (sizeof(T) == 2) {
      return sk == 1 ? block_simd<T, Transpose16x16x16<false>>(s, d, nk, nl, sk, sl, dk, stream)
                     : block_simd<T, Transpose16x16x16<true>>(s, d, nk, nl, sk, sl, dk, stream);
    }
  }
#endif
  block_generic(s, d, nk, nl, sk, sl, dk);
}

// The super-tile of a transpose whose destination rows are pages apart: bl destination columns
// (one 4 KiB page of each destination row: a walk along l then fills whole pages) by bk
// destination rows, bk chosen so the pages one super-tile touches -- bk destination pages plus the
// pages of its bl source rows, the latter counted up to half of it -- stay within kTlbPages (at
// most ~1.5x that when the source rows alone need more, as for 151936 x 896: 897 + 448). Without it a walk along l takes a TLB miss
// for nearly every 64-byte source line (source rows 3.5 KiB apart): 20% of memcpy on a 544 MB
// matrix. kTlbPages is well inside the second-level TLB of current x86 cores (1536 entries on
// Skylake, 2048 on Zen 2/3 and Ice Lake, 3072 on Zen 4), so the tiling does not depend on one
// machine's cache sizes.
inline std::pair<std::int64_t, std::int64_t> tlb_tile(std::int64_t nk, std::int64_t sl, std::int64_t es,
                                                      std::int64_t line) {
  constexpr std::int64_t kPage = 4096, kTlbPages = 1024;
  const std::int64_t bl = std::max(line, kPage / es);
  const std::int64_t row_bytes = std::llabs(sl) * es;
  const std::int64_t src_pages = row_bytes >= kPage ? bl : (bl * row_bytes + kPage - 1) / kPage + 1;
  const std::int64_t room = std::max(line, kTlbPages - std::min(src_pages, kTlbPages / 2));
  // As many k-blocks as needed, then evened out and rounded up to whole lines.
  const std::int64_t kblocks = (nk + room - 1) / room;
  const std::int64_t bk = ((nk + kblocks - 1) / kblocks + line - 1) / line * line;
  return {std::min(nk, bk), bl};
}

template <class T>
void run_tiles(const Plan& p, std::size_t k, const T* src, T* dst, int threads) {
  const std::size_t l = p.n.size() - 1;
  const std::int64_t nk = p.n[k], nl = p.n[l], sk = p.s[k], sl = p.s[l], dk = p.d[k];
  const std::int64_t es = static_cast<std::int64_t>(sizeof(T));
  const std::int64_t line = std::max<std::int64_t>(8, 64 / es);
  std::vector<std::size_t> others;
  for (std::size_t a = 0; a < l; ++a)
    if (a != k) others.push_back(a);
  // Three ways to walk the plane in line x line tiles; each keeps every stream sequential or
  // nearly so (a jump of more than a page per line costs a TLB miss per line):
  //  - 3-D: when another axis m moves both sides by less than a page (CHWN:F's H), each unit is one
  //    tile position run along m: ~`line` short-stride streams on both sides;
  //  - k-band: `line` k-rows run along all of l, when the source lines it reads are under 1 KiB
  //    apart (several share a page): `line` sequential destination rows (NHWC -> NCHW);
  //  - TLB tiles (tlb_tile): the destination rows are far apart and so are the source lines, each
  //    in a page of its own or nearly (the 151936 x 896 transpose: 3.5 KiB): a
  //    super-tile of one page of every destination row it covers by the source rows it needs, each
  //    walked in line x line tiles `line` k-rows at a time; the super-tile's pages stay in the TLB
  //    until they are used up, so each page is looked up about once;
  //  - l-band: `line` l-columns run along all of k: `line` sequential source rows, destination
  //    lines `dk` apart (NCHW -> NHWC).
  std::size_t m = l;  // l: none
  for (auto a : others) {
    const std::int64_t jump = std::max(std::llabs(p.s[a]), std::llabs(p.d[a])) * es;
    if (jump <= 4096 && (m == l || jump < std::max(std::llabs(p.s[m]), std::llabs(p.d[m])) * es)) m = a;
  }
  std::int64_t bk = line, bl = line;
  bool l_major = false;  // units walk all k-blocks of an l-block before the next l-block
  if (m == l) {
    if (std::llabs(dk) > std::llabs(sl) && std::llabs(sl) * es < 1024) {
      bl = nl;  // k-band: the source lines a band reads share pages (NHWC -> NCHW: 16 per page)
    } else if (std::llabs(dk) > std::llabs(sl)) {
      const auto [tk, tl] = tlb_tile(nk, sl, es, line);
      bk = tk;
      bl = std::min(nl, tl);
      l_major = true;
    } else {
      bk = nk;
    }
  } else {
    others.erase(std::find(others.begin(), others.end(), m));
  }
  const std::int64_t nm = m == l ? 1 : p.n[m], sm = m == l ? 0 : p.s[m], dm = m == l ? 0 : p.d[m];
  // The source's slowest axis first, so that consecutive units continue the same streams.
  std::stable_sort(others.begin(), others.end(),
                   [&](std::size_t a, std::size_t b) { return std::llabs(p.s[a]) > std::llabs(p.s[b]); });
  Outer outer(p, others);
  const std::int64_t kblocks = (nk + bk - 1) / bk, lblocks = (nl + bl - 1) / bl, per = kblocks * lblocks;
  parallel_units(outer.count() * per, threads, [&](std::int64_t b, std::int64_t e) {
    Outer o = outer;
    std::int64_t cur = b / per;
    o.seek(cur);
    for (std::int64_t u = b; u < e; ++u) {
      if (u / per != cur) {
        cur = u / per;
        o.next();
      }
      const std::int64_t kb = l_major ? (u % per) % kblocks : (u % per) / lblocks;
      const std::int64_t lb = l_major ? (u % per) / kblocks : (u % per) % lblocks;
      const std::int64_t k0 = kb * bk, l0 = lb * bl;
      const T* s = src + o.src + k0 * sk + l0 * sl;
      T* d = dst + o.dst + k0 * dk + l0;
      const std::int64_t tk = std::min(bk, nk - k0), tl = std::min(bl, nl - l0);
      for (std::int64_t x = 0; x < nm; ++x) {
        // 3-D walk: the tile 4 steps along m is fetched ahead (its rows are pages apart).
        if (nm > 1 && x + 4 < nm) prefetch_rows(s + (x + 4) * sm + (sk > 0 ? 0 : 1 - tk), tl, sl);
        block(s + x * sm, d + x * dm, tk, tl, sk, sl, dk, p.stream);
      }
    }
    if (p.stream) store_fence();  // streaming stores are weakly ordered: publish them before the join
  });
}

// ---- table: short destination rows (a 3x3 kernel plane, 3 channels, runs of 9) are copied a chunk
// of ~1024 elements at a time through a precomputed table of source offsets, instead of paying a
// loop setup per row.
template <class T>
void run_table(const Plan& p, const T* src, T* dst, int threads) {
  constexpr std::int64_t kChunk = 1024;
  const std::size_t r = p.n.size();
  std::size_t j0 = r - 1;  // inner axes j0..r-1 form the block
  std::int64_t block_size = p.n[r - 1];
  while (j0 > 0 && block_size * p.n[j0 - 1] <= kChunk) block_size *= p.n[--j0];
  // The next axis out is cut into pieces of q blocks, so one table pass covers ~kChunk elements.
  const std::size_t c = j0 > 0 ? j0 - 1 : r;
  const std::int64_t nc = c < r ? p.n[c] : 1;
  const std::int64_t q = std::min(nc, std::max<std::int64_t>(1, kChunk / block_size)), pieces = (nc + q - 1) / q;
  std::vector<std::int64_t> table(static_cast<std::size_t>(q * block_size));
  {
    std::vector<std::size_t> inner;
    if (c < r) inner.push_back(c);
    for (std::size_t a = j0; a < r; ++a) inner.push_back(a);
    Outer it(p, inner);
    for (std::size_t x = 0; x < table.size(); ++x) {
      table[x] = it.src;
      it.next();
    }
  }
  std::vector<std::size_t> axes;
  for (std::size_t a = 0; c < r && a < c; ++a) axes.push_back(a);
  Outer outer(p, axes);
  const std::int64_t sc = c < r ? p.s[c] : 0, dc = c < r ? p.d[c] : 0;
  parallel_units(outer.count() * pieces, threads, [&](std::int64_t b, std::int64_t e) {
    Outer o = outer;
    std::int64_t cur = b / pieces;
    o.seek(cur);
    const std::int64_t* tb = table.data();
    for (std::int64_t u = b; u < e; ++u) {
      if (u / pieces != cur) {
        cur = u / pieces;
        o.next();
      }
      const std::int64_t c0 = (u % pieces) * q, len = (std::min(nc, c0 + q) - c0) * block_size;
      const T* s = src + o.src + c0 * sc;
      T* d = dst + o.dst + c0 * dc;
      for (std::int64_t x = 0; x < len; ++x) d[x] = s[tb[x]];
    }
  });
}

template <class T>
void run_plan(const Plan& p, const std::byte* src_bytes, std::byte* dst_bytes, int threads) {
  const T* src = reinterpret_cast<const T*>(src_bytes) + p.offset;
  T* dst = reinterpret_cast<T*>(dst_bytes);
  const std::size_t r = p.n.size();
  if (r == 0) {  // one element
    dst[0] = src[0];
    return;
  }
  const std::size_t l = r - 1;
  const std::int64_t sl = p.s[l], nl = p.n[l], es = static_cast<std::int64_t>(sizeof(T));
  if (sl == 1 || sl == -1) {
    // Runs: memcpy (or reversed) them, unless they are too short to pay a call each.
    if (r == 1 || nl * es >= 256) return run_rows(p, src, dst, threads);
    return run_table(p, src, dst, threads);
  }
  // k: the axis the source walks fastest (the innermost one on a tie).
  std::size_t k = l;
  for (std::size_t a = 0; a < l; ++a)
    if (k == l || std::llabs(p.s[a]) <= std::llabs(p.s[k])) k = a;
  if (k != l && std::llabs(p.s[k]) < std::llabs(sl) && nl * es >= 32) return run_tiles(p, k, src, dst, threads);
  if (r >= 2 && nl <= 256) return run_table(p, src, dst, threads);
  return run_rows(p, src, dst, threads);
}

}  // namespace detail

std::vector<std::int64_t> c_strides(const Shape& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (std::size_t a = shape.size(); a-- > 1;) s[a - 1] = s[a] * shape[a];
  return s;
}

namespace {
// The odometer with a copy of ES bytes (0: elem_size, any size). A fixed size is one load and one
// store; a call to memcpy per element was most of the time of tests that check the engine against
// this definition under the sanitizers.
template <std::size_t ES>
void naive_odometer(const std::byte* src, std::byte* dst, std::size_t elem_size, const Shape& dst_shape,
                    const std::vector<std::int64_t>& src_strides, std::int64_t src_offset) {
  const std::int64_t n = shape_numel(dst_shape);
  std::vector<std::int64_t> idx(dst_shape.size(), 0);
  std::int64_t off = src_offset;
  const auto es = static_cast<std::int64_t>(elem_size);
  for (std::int64_t i = 0; i < n; ++i) {
    if constexpr (ES == 0) {
      std::memcpy(dst + i * es, src + off * es, elem_size);
    } else {
      std::memcpy(dst + i * es, src + off * es, ES);
    }
    for (std::size_t a = dst_shape.size(); a-- > 0;) {  // odometer: last axis fastest
      off += src_strides[a];
      if (++idx[a] < dst_shape[a]) break;
      off -= src_strides[a] * dst_shape[a];
      idx[a] = 0;
    }
  }
}
}  // namespace

void permute_copy_naive(const std::byte* src, std::byte* dst, std::size_t elem_size,
                        const Shape& dst_shape, const std::vector<std::int64_t>& src_strides,
                        std::int64_t src_offset) {
  assert(dst_shape.size() == src_strides.size());
  switch (elem_size) {
    case 2: return naive_odometer<2>(src, dst, elem_size, dst_shape, src_strides, src_offset);
    case 4: return naive_odometer<4>(src, dst, elem_size, dst_shape, src_strides, src_offset);
    case 8: return naive_odometer<8>(src, dst, elem_size, dst_shape, src_strides, src_offset);
    default: return naive_odometer<0>(src, dst, elem_size, dst_shape, src_strides, src_offset);
  }
}

SimpleGather simplify_gather(const Shape& shape, const std::vector<std::int64_t>& strides,
                             std::int64_t offset) {
  assert(shape.size() == strides.size());
  SimpleGather g;
  g.offset = offset;
  for (std::size_t a = 0; a < shape.size(); ++a) {
    if (shape[a] == 1) continue;  // contributes nothing; dropping it lets its neighbours merge
    // Walking this axis to its end lands exactly where the outer axis steps: one longer run.
    if (!g.shape.empty() && g.strides.back() == strides[a] * shape[a]) {
      g.shape.back() *= shape[a];
      g.strides.back() = strides[a];
    } else {
      g.shape.push_back(shape[a]);
      g.strides.push_back(strides[a]);
    }
  }
  return g;
}

namespace {

using detail::Plan;

Plan simplify(const Shape& shape, const std::vector<std::int64_t>& strides, std::int64_t offset) {
  SimpleGather g = simplify_gather(shape, strides, offset);
  Plan p;
  p.n = std::move(g.shape);
  p.s = std::move(g.strides);
  p.offset = g.offset;
  p.d = c_strides(p.n);
  return p;
}

int pick_threads(const PermuteOptions& o, std::size_t bytes) {
  if (o.threads > 0) return o.threads;
  if (bytes < o.min_parallel_bytes) return 1;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(std::min(hw, 64u));
}

// Elements of other sizes are copied as words of the largest size dividing them, with an extra
// innermost contiguous axis: the plan then sees a run it can memcpy.
void reshape_to_words(std::size_t& es, Shape& shape, std::vector<std::int64_t>& strides, std::int64_t& offset) {
  std::size_t word = es % 8 == 0 ? 8 : es % 4 == 0 ? 4 : es % 2 == 0 ? 2 : 1;
  const auto k = static_cast<std::int64_t>(es / word);
  for (auto& s : strides) s *= k;
  offset *= k;
  shape.push_back(k);
  strides.push_back(1);
  es = word;
}

}  // namespace

void permute_copy(const std::byte* src, std::byte* dst, std::size_t elem_size, const Shape& dst_shape,
                  const std::vector<std::int64_t>& src_strides, std::int64_t src_offset,
                  const PermuteOptions& options) {
  assert(dst_shape.size() == src_strides.size());
  assert(elem_size > 0);
  const std::int64_t numel = shape_numel(dst_shape);
  if (numel == 0) return;
#ifndef NDEBUG
  std::int64_t lowest = src_offset;
  for (std::size_t a = 0; a < dst_shape.size(); ++a)
    if (src_strides[a] < 0) lowest += src_strides[a] * (dst_shape[a] - 1);
  assert(lowest >= 0 && "permute_copy: a stride walks before the start of src");
#endif
  std::size_t es = elem_size;
  Plan plan;
  if (es == 1 || es == 2 || es == 4 || es == 8) {
    plan = simplify(dst_shape, src_strides, src_offset);
  } else {
    Shape shape = dst_shape;
    std::vector<std::int64_t> strides = src_strides;
    std::int64_t offset = src_offset;
    reshape_to_words(es, shape, strides, offset);
    plan = simplify(shape, strides, offset);
  }
  const int threads = pick_threads(options, static_cast<std::size_t>(numel) * elem_size);
  plan.stream = static_cast<std::size_t>(numel) * elem_size >= options.min_streaming_bytes;
  switch (es) {
    case 1: detail::run_plan<detail::Word1>(plan, src, dst, threads); break;
    case 2: detail::run_plan<detail::Word2>(plan, src, dst, threads); break;
    case 4: detail::run_plan<detail::Word4>(plan, src, dst, threads); break;
    default: detail::run_plan<detail::Word8>(plan, src, dst, threads); break;
  }
}

}  // namespace validate::layout
