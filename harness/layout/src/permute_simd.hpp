#pragma once
// Internal to the permute engine: the AVX2 kernels (compiled with target attributes and chosen at
// run time by have_avx2(), so the library still runs on CPUs without AVX2).
#include <algorithm>
#include <cstdint>

#include "permute_plan.hpp"

#if VALIDATE_LAYOUT_X86
namespace validate::layout::detail {

// d[j] = s[-j], 32 bytes at a time, reversed in registers; with `stream`, whole aligned destination
// lines go out as non-temporal stores (a flip of a big activation: memcpy's traffic, no more).
template <class T>
__attribute__((target("avx2"))) inline __m256i reverse32(__m256i v) {
  if constexpr (sizeof(T) == 4) {
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0));
  } else if constexpr (sizeof(T) == 8) {
    return _mm256_permute4x64_epi64(v, 0x1B);
  } else {
    const __m256i bytes = _mm256_setr_epi8(14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1,
                                           14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1);
    return _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, bytes), 0x4E);
  }
}

template <class T>
__attribute__((target("avx2"))) void copy_reversed_avx2(const T* s, T* d, std::int64_t len, bool stream) {
  constexpr std::int64_t V = 32 / sizeof(T);
  std::int64_t j = 0;
  if (stream) {
    while (j < len && reinterpret_cast<std::uintptr_t>(d + j) % 64 != 0) {
      d[j] = s[-j];
      ++j;
    }
    for (; j + 2 * V <= len; j += 2 * V) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s - j - (V - 1)));
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s - j - (2 * V - 1)));
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + j), reverse32<T>(a));
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + j + V), reverse32<T>(b));
    }
  }
  for (; j + V <= len; j += V) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s - j - (V - 1)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + j), reverse32<T>(a));
  }
  for (; j < len; ++j) d[j] = s[-j];
}

// Register transposes of V x V elements. `s` is the lowest address of the first source run (for Rev,
// the run holds k backwards: a flipped axis); rows are `sl` bytes apart, destination rows `dk` bytes.
template <bool Rev>
struct Transpose8x8x32 {
  static constexpr int V = 8;
  __attribute__((target("avx2"))) void operator()(const char* s, char* d, std::int64_t sl, std::int64_t dk) const {
    __m256 r[8], t[8], u[8];
    for (int j = 0; j < 8; ++j) {
      r[j] = _mm256_loadu_ps(reinterpret_cast<const float*>(s + j * sl));
      if (Rev) r[j] = _mm256_permutevar8x32_ps(r[j], _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0));
    }
    for (int j = 0; j < 8; j += 2) {
      t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
      t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
    }
    for (int j = 0; j < 8; j += 4) {
      u[j + 0] = _mm256_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(1, 0, 1, 0));
      u[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(3, 2, 3, 2));
      u[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(1, 0, 1, 0));
      u[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int j = 0; j < 4; ++j) {
      _mm256_storeu_ps(reinterpret_cast<float*>(d + j * dk), _mm256_permute2f128_ps(u[j], u[j + 4], 0x20));
      _mm256_storeu_ps(reinterpret_cast<float*>(d + (j + 4) * dk), _mm256_permute2f128_ps(u[j], u[j + 4], 0x31));
    }
  }
};

template <bool Rev>
struct Transpose4x4x64 {
  static constexpr int V = 4;
  __attribute__((target("avx2"))) void operator()(const char* s, char* d, std::int64_t sl, std::int64_t dk) const {
    __m256d r[4];
    for (int j = 0; j < 4; ++j) {
      r[j] = _mm256_loadu_pd(reinterpret_cast<const double*>(s + j * sl));
      if (Rev) r[j] = _mm256_permute4x64_pd(r[j], 0x1B);
    }
    const __m256d t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]);
    const __m256d t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
    _mm256_storeu_pd(reinterpret_cast<double*>(d), _mm256_permute2f128_pd(t0, t2, 0x20));
    _mm256_storeu_pd(reinterpret_cast<double*>(d + dk), _mm256_permute2f128_pd(t1, t3, 0x20));
    _mm256_storeu_pd(reinterpret_cast<double*>(d + 2 * dk), _mm256_permute2f128_pd(t0, t2, 0x31));
    _mm256_storeu_pd(reinterpret_cast<double*>(d + 3 * dk), _mm256_permute2f128_pd(t1, t3, 0x31));
  }
};

// 16x16 of 16-bit: the SSE2 8x8 network on both 128-bit lanes at once (rows 0-7 and 8-15 give the
// 8x8 transposes of the four quadrants), then lanes exchanged.
template <bool Rev>
struct Transpose16x16x16 {
  static constexpr int V = 16;
  __attribute__((target("avx2"))) void operator()(const char* s, char* d, std::int64_t sl, std::int64_t dk) const {
    __m256i o[2][8];
    for (int half = 0; half < 2; ++half) {
      __m256i a[8], b[8], c[8];
      for (int j = 0; j < 8; ++j) {
        a[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + (8 * half + j) * sl));
        if (Rev) a[j] = reverse32<Word2>(a[j]);
      }
      for (int j = 0; j < 8; j += 2) {
        b[j] = _mm256_unpacklo_epi16(a[j], a[j + 1]);
        b[j + 1] = _mm256_unpackhi_epi16(a[j], a[j + 1]);
      }
      for (int j = 0; j < 8; j += 4) {
        c[j + 0] = _mm256_unpacklo_epi32(b[j], b[j + 2]);
        c[j + 1] = _mm256_unpackhi_epi32(b[j], b[j + 2]);
        c[j + 2] = _mm256_unpacklo_epi32(b[j + 1], b[j + 3]);
        c[j + 3] = _mm256_unpackhi_epi32(b[j + 1], b[j + 3]);
      }
      for (int i = 0; i < 4; ++i) {
        o[half][2 * i] = _mm256_unpacklo_epi64(c[i], c[i + 4]);
        o[half][2 * i + 1] = _mm256_unpackhi_epi64(c[i], c[i + 4]);
      }
    }
    for (int i = 0; i < 8; ++i) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i * dk), _mm256_permute2x128_si256(o[0][i], o[1][i], 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + (i + 8) * dk), _mm256_permute2x128_si256(o[0][i], o[1][i], 0x31));
    }
  }
};

// block_generic's contract with V x V register transposes; sk is +1 or -1 (Micro's Rev).
// Full tiles of L x L elements (L * E = 64 bytes: one cache line per row on both sides) are first
// staged through a 64 x L byte buffer: each source line is read whole, each destination line
// written whole, back to back. Without it, a source or destination row stride that is a multiple
// of 4 KiB (NCHW planes) puts the 16 half-used lines of a tile in one 12-way L1 set, and every
// line is fetched twice.
template <class T, class Micro>
__attribute__((target("avx2"))) void block_simd(const T* s, T* d, std::int64_t nk, std::int64_t nl, std::int64_t sk,
                                                std::int64_t sl, std::int64_t dk, bool stream) {
  constexpr std::int64_t V = Micro::V, E = sizeof(T), L = 64 / E;
  const Micro micro{};
  alignas(64) char buf[64 * L];
  alignas(64) char tile[64 * L];
  const char* sb = reinterpret_cast<const char*>(s);
  char* db = reinterpret_cast<char*>(d);
  // Streaming needs every destination line of a tile 64-byte aligned.
  stream = stream && reinterpret_cast<std::uintptr_t>(db) % 64 == 0 && (E * dk) % 64 == 0;
  // Source address of the V (or L) k-elements starting at i of row l: for a reversed k the run
  // starts at its last element.
  const auto src_at = [&](std::int64_t i, std::int64_t l, std::int64_t width) {
    return sb + E * (l * sl + (sk > 0 ? i : -(i + width - 1)));
  };
  const std::int64_t nkL = nk / L * L, nlL = nl / L * L, nlV = nl / V * V;
  // Software prefetch of the tile ~4 KiB ahead in the walk: with 8-32 rows in flight at page-sized
  // strides the hardware prefetchers lose track of the streams.
  constexpr std::int64_t kPrefetch = std::max<std::int64_t>(2, 4096 / (64 * L));
  const bool along_l = nlL > L;
  for (std::int64_t i0 = 0; i0 < nkL; i0 += L) {
    for (std::int64_t l0 = 0; l0 < nlL; l0 += L) {
      const std::int64_t pi = along_l ? i0 : i0 + kPrefetch * L, pl = along_l ? l0 + kPrefetch * L : l0;
      if (pi + L <= nk && pl + L <= nl)
        for (std::int64_t j = 0; j < L; ++j) _mm_prefetch(src_at(pi, pl + j, L), _MM_HINT_T0);
      for (std::int64_t j = 0; j < L; ++j) {
        const char* row = src_at(i0, l0 + j, L);
        _mm256_store_si256(reinterpret_cast<__m256i*>(buf + 64 * j), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(buf + 64 * j + 32),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32)));
      }
      char* out = db + E * (i0 * dk + l0);
      if (!stream) {
        for (std::int64_t ih = 0; ih < L; ih += V)
          for (std::int64_t lh = 0; lh < L; lh += V)
            micro(buf + 64 * lh + E * (sk > 0 ? ih : L - ih - V), out + E * (ih * dk + lh), 64, E * dk);
        continue;
      }
      // Transposed into a second buffer, then each destination line leaves in two aligned streaming
      // stores, back to back, so the write-combining buffer flushes whole lines.
      for (std::int64_t ih = 0; ih < L; ih += V)
        for (std::int64_t lh = 0; lh < L; lh += V)
          micro(buf + 64 * lh + E * (sk > 0 ? ih : L - ih - V), tile + 64 * ih + E * lh, 64, 64);
      for (std::int64_t i = 0; i < L; ++i) {
        __m256i* o = reinterpret_cast<__m256i*>(out + E * i * dk);
        _mm256_stream_si256(o, _mm256_load_si256(reinterpret_cast<const __m256i*>(tile + 64 * i)));
        _mm256_stream_si256(o + 1, _mm256_load_si256(reinterpret_cast<const __m256i*>(tile + 64 * i + 32)));
      }
    }
  }
  // The edges: V x V transposes straight from the source, then single elements.
  const auto direct = [&](std::int64_t i_begin, std::int64_t i_end, std::int64_t l_begin) {
    for (std::int64_t i = i_begin; i + V <= i_end; i += V)
      for (std::int64_t l0 = l_begin; l0 < nlV; l0 += V) micro(src_at(i, l0, V), db + E * (i * dk + l0), E * sl, E * dk);
    for (std::int64_t i = i_begin; i < i_end; ++i) {
      const std::int64_t j_begin = (i < i_begin + (i_end - i_begin) / V * V) ? std::max(l_begin, nlV) : l_begin;
      for (std::int64_t j = j_begin; j < nl; ++j) d[i * dk + j] = s[i * sk + j * sl];
    }
  };
  if (nlL < nl) direct(0, nkL, nlL);
  direct(nkL, nk, 0);
}


}  // namespace validate::layout::detail
#endif  // VALIDATE_LAYOUT_X86
