// The vectorised body of Philox::fill_normal: 8 Philox4x32-10 blocks at once in AVX2, Box-Muller
// through glibc's libmvec (log, sin, cos on 4 doubles). The scalar path (rng.cpp) defines the
// stream: round(r * cos(2*pi*u2)) to float, with r = sqrt(-2 log u1) from glibc's scalar log/cos/
// sin in double. libmvec is accurate to 4 ULP, not bit-identical to the scalar functions, so each
// result is checked: when the double lies so close to a float rounding boundary (within a bound
// far above both libraries' error) that the two could round differently, the block is recomputed
// by the scalar code. Everything else provably rounds to the same float, so the bytes (and every
// reference hash) do not change. The check fires about once in 10^5 values.
#include "rng_normal_avx2.hpp"

#if VALIDATE_RNG_AVX2
#include <cpuid.h>
#include <immintrin.h>


// glibc's AVX2 variants (the vector ABI's 'd' ISA); declared with the target attribute so the
// __m256d arguments pass in YMM registers as that ABI says (clang refuses them otherwise).
extern "C" {
__attribute__((target("avx2"))) __m256d _ZGVdN4v_log(__m256d);
__attribute__((target("avx2"))) __m256d _ZGVdN4v_sin(__m256d);
__attribute__((target("avx2"))) __m256d _ZGVdN4v_cos(__m256d);
// The AVX-512 variants ('e' ISA: 8 doubles), same accuracy contract (4 ULP).
__attribute__((target("avx512f"))) __m512d _ZGVeN8v_log(__m512d);
__attribute__((target("avx512f"))) __m512d _ZGVeN8v_sin(__m512d);
__attribute__((target("avx512f"))) __m512d _ZGVeN8v_cos(__m512d);
}

namespace validate::detail {

bool normal_avx2_available() {
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((b >> 5) & 1u)) return false;  // AVX2
    if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1u)) return false;          // OSXSAVE
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6u) == 6u;  // the OS saves YMM state
  }();
  return ok;
}

bool normal_avx512_available() {
  static const bool ok = [] {
    if (!normal_avx2_available()) return false;
    unsigned a = 0, b = 0, c = 0, d = 0;
    // AVX512F (bit 16) and AVX512DQ (bit 17) of leaf 7 EBX.
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || ((b >> 16) & 3u) != 3u) return false;
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 0xE6u) == 0xE6u;  // the OS saves opmask and ZMM state too
  }();
  return ok;
}

namespace {

struct Words {
  __m256i w[4];
};

// mullo/mulhi of 8 unsigned 32-bit lanes by a constant.
__attribute__((target("avx2"))) inline void mul_hi_lo(__m256i a, __m256i m, __m256i& hi, __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

// Blocks counter .. counter+7 (the counter's high word is the same for all 8: the caller never
// crosses a 2^32 boundary inside a batch).
__attribute__((target("avx2"))) Words philox8(std::uint64_t key, std::uint64_t counter) {
  const __m256i M0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i M1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(counter))),
                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i c1 = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(counter >> 32)));
  __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int r = 0; r < 10; ++r) {
    __m256i hi0, lo0, hi1, lo1;
    mul_hi_lo(c0, M0, hi0, lo0);
    mul_hi_lo(c2, M1, hi1, lo1);
    const __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
    const __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// (w >> 8) of 4 lanes as exact doubles.
__attribute__((target("avx2"))) inline __m256d top24(__m128i w) {
  return _mm256_cvtepi32_pd(_mm_srli_epi32(w, 8));
}

// Lanes whose float rounding could differ from the scalar path's (see the file comment).
__attribute__((target("avx2"))) inline int risky(__m256d y, __m256d r) {
  const __m128 f = _mm256_cvtpd_ps(y);  // round to nearest even, as static_cast<float>
  const __m256d fd = _mm256_cvtps_pd(f);
  const __m256d sign = _mm256_set1_pd(-0.0);
  const __m256d d = _mm256_andnot_pd(sign, _mm256_sub_pd(y, fd));  // exact: y and fd are close
  // Half a float ULP of |f|: its exponent alone, times 2^-24.
  const __m128i fbits = _mm_castps_si128(f);
  const __m128i expo = _mm_and_si128(fbits, _mm_set1_epi32(0x7f800000));
  const __m256d half = _mm256_mul_pd(_mm256_cvtps_pd(_mm_castsi128_ps(expo)), _mm256_set1_pd(0x1p-24));
  // Both libraries are within a few 2^-53 * r of the true value; 2^-40 * r leaves a wide margin.
  const __m256d bound = _mm256_add_pd(_mm256_mul_pd(r, _mm256_set1_pd(0x1p-40)), _mm256_set1_pd(0x1p-200));
  __m256d bad = _mm256_cmp_pd(_mm256_sub_pd(half, d), bound, _CMP_LT_OQ);
  // A power of two has a narrower ULP below it, and tiny or zero values have no margin to spare.
  const __m128i mant0 = _mm_cmpeq_epi32(_mm_and_si128(fbits, _mm_set1_epi32(0x007fffff)), _mm_setzero_si128());
  const __m128i tiny = _mm_cmplt_epi32(expo, _mm_set1_epi32(0x1f800000));  // |f| < 2^-64
  const __m128i other = _mm_or_si128(mant0, tiny);
  bad = _mm256_or_pd(bad, _mm256_castsi256_pd(_mm256_cvtepi32_epi64(other)));
  return _mm256_movemask_pd(bad);
}

}  // namespace

__attribute__((target("avx2"))) void normal_blocks_avx2(std::uint64_t key, std::uint64_t first_block,
                                                        std::uint64_t nbatches, float scale, float* out,
                                                        void (*scalar_block)(std::uint64_t, std::uint64_t, float, float*)) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const __m256d two_pi = _mm256_set1_pd(kTwoPi), minus_two = _mm256_set1_pd(-2.0), inv = _mm256_set1_pd(0x1p-24);
  const __m256d one = _mm256_set1_pd(1.0);
  const __m256 sc = _mm256_set1_ps(scale);
  for (std::uint64_t b = 0; b < nbatches; ++b, out += 32) {
    const std::uint64_t counter = first_block + 8 * b;
    const Words w = philox8(key, counter);
    alignas(32) float v[4][8];  // v[k][j]: element k of block j
    int bad_blocks = 0;
    for (int p = 0; p < 2; ++p) {
      for (int h = 0; h < 2; ++h) {  // blocks 4h .. 4h+3
        const __m128i w1 = h ? _mm256_extracti128_si256(w.w[2 * p], 1) : _mm256_castsi256_si128(w.w[2 * p]);
        const __m128i w2 = h ? _mm256_extracti128_si256(w.w[2 * p + 1], 1) : _mm256_castsi256_si128(w.w[2 * p + 1]);
        const __m256d u1 = _mm256_mul_pd(_mm256_add_pd(top24(w1), one), inv);
        const __m256d u2 = _mm256_mul_pd(top24(w2), inv);
        const __m256d r = _mm256_sqrt_pd(_mm256_mul_pd(minus_two, _ZGVdN4v_log(u1)));
        const __m256d a = _mm256_mul_pd(two_pi, u2);
        const __m256d yc = _mm256_mul_pd(r, _ZGVdN4v_cos(a));
        const __m256d ys = _mm256_mul_pd(r, _ZGVdN4v_sin(a));
        bad_blocks |= (risky(yc, r) | risky(ys, r)) << (4 * h);
        _mm_store_ps(&v[2 * p][4 * h], _mm256_cvtpd_ps(yc));
        _mm_store_ps(&v[2 * p + 1][4 * h], _mm256_cvtpd_ps(ys));
      }
    }
    // Transpose to stream order (block j: v[0][j] v[1][j] v[2][j] v[3][j]) and scale in float.
    const __m256 r0 = _mm256_mul_ps(_mm256_load_ps(v[0]), sc), r1 = _mm256_mul_ps(_mm256_load_ps(v[1]), sc);
    const __m256 r2 = _mm256_mul_ps(_mm256_load_ps(v[2]), sc), r3 = _mm256_mul_ps(_mm256_load_ps(v[3]), sc);
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);  // 0 1 | 0 1 of blocks
    const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    const __m256 s0 = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(t0), _mm256_castps_pd(t2)));
    const __m256 s1 = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(t0), _mm256_castps_pd(t2)));
    const __m256 s2 = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(t1), _mm256_castps_pd(t3)));
    const __m256 s3 = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(t1), _mm256_castps_pd(t3)));
    // s0 = blocks 0,4; s1 = blocks 1,5; s2 = 2,6; s3 = 3,7 (128-bit halves).
    _mm256_storeu_ps(out + 0, _mm256_permute2f128_ps(s0, s1, 0x20));
    _mm256_storeu_ps(out + 8, _mm256_permute2f128_ps(s2, s3, 0x20));
    _mm256_storeu_ps(out + 16, _mm256_permute2f128_ps(s0, s1, 0x31));
    _mm256_storeu_ps(out + 24, _mm256_permute2f128_ps(s2, s3, 0x31));
    for (int j = 0; bad_blocks; ++j, bad_blocks >>= 1)
      if (bad_blocks & 1) scalar_block(key, counter + static_cast<std::uint64_t>(j), scale, out + 4 * j);
  }
}

// GCC 12's AVX-512 headers start conversions from _mm512_undefined_*(), which -Wmaybe-uninitialized
// reports as a use of an uninitialised value (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace {

struct Words16 {
  __m512i w[4];
};

__attribute__((target("avx512f"))) inline void mul_hi_lo16(__m512i a, __m512i m, __m512i& hi, __m512i& lo) {
  const __m512i even = _mm512_mul_epu32(a, m);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
}

// philox8 on 16 lanes: blocks counter .. counter+15 (same high word for all 16).
__attribute__((target("avx512f"))) Words16 philox16(std::uint64_t key, std::uint64_t counter) {
  const __m512i M0 = _mm512_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m512i M1 = _mm512_set1_epi32(static_cast<int>(0xCD9E8D57u));
  __m512i c0 = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(counter))),
                                _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  __m512i c1 = _mm512_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(counter >> 32)));
  __m512i c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int r = 0; r < 10; ++r) {
    __m512i hi0, lo0, hi1, lo1;
    mul_hi_lo16(c0, M0, hi0, lo0);
    mul_hi_lo16(c2, M1, hi1, lo1);
    const __m512i n0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32(static_cast<int>(k0)));
    const __m512i n2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32(static_cast<int>(k1)));
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// risky() on 8 lanes: the same test, bit j set where lane j could round differently.
__attribute__((target("avx512f,avx512dq,avx2"))) inline unsigned risky8(__m512d y, __m512d r) {
  const __m256 f = _mm512_cvtpd_ps(y);
  const __m512d d = _mm512_abs_pd(_mm512_sub_pd(y, _mm512_cvtps_pd(f)));
  const __m256i fbits = _mm256_castps_si256(f);
  const __m256i expo = _mm256_and_si256(fbits, _mm256_set1_epi32(0x7f800000));
  const __m512d half = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_castsi256_ps(expo)), _mm512_set1_pd(0x1p-24));
  const __m512d bound = _mm512_add_pd(_mm512_mul_pd(r, _mm512_set1_pd(0x1p-40)), _mm512_set1_pd(0x1p-200));
  const unsigned bad = _mm512_cmp_pd_mask(_mm512_sub_pd(half, d), bound, _CMP_LT_OQ);
  const __m256i mant0 = _mm256_cmpeq_epi32(_mm256_and_si256(fbits, _mm256_set1_epi32(0x007fffff)), _mm256_setzero_si256());
  const __m256i tiny = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x1f800000), expo);
  return bad | static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_or_si256(mant0, tiny))));
}

// Eight blocks' values v[k][0..8) (element k of block j) to stream order, scaled, at out[0..32).
__attribute__((target("avx2"))) inline void store_blocks8(const float* v0, const float* v1, const float* v2,
                                                          const float* v3, __m256 sc, float* out) {
  const __m256 r0 = _mm256_mul_ps(_mm256_load_ps(v0), sc), r1 = _mm256_mul_ps(_mm256_load_ps(v1), sc);
  const __m256 r2 = _mm256_mul_ps(_mm256_load_ps(v2), sc), r3 = _mm256_mul_ps(_mm256_load_ps(v3), sc);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 s0 = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(t0), _mm256_castps_pd(t2)));
  const __m256 s1 = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(t0), _mm256_castps_pd(t2)));
  const __m256 s2 = _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(t1), _mm256_castps_pd(t3)));
  const __m256 s3 = _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(t1), _mm256_castps_pd(t3)));
  _mm256_storeu_ps(out + 0, _mm256_permute2f128_ps(s0, s1, 0x20));
  _mm256_storeu_ps(out + 8, _mm256_permute2f128_ps(s2, s3, 0x20));
  _mm256_storeu_ps(out + 16, _mm256_permute2f128_ps(s0, s1, 0x31));
  _mm256_storeu_ps(out + 24, _mm256_permute2f128_ps(s2, s3, 0x31));
}

}  // namespace

// normal_blocks_avx2 with twice the width: 16 blocks per batch, Box-Muller on 8 doubles.
__attribute__((target("avx512f,avx512dq,avx2"))) void normal_blocks_avx512(
    std::uint64_t key, std::uint64_t first_block, std::uint64_t nbatches, float scale, float* out,
    void (*scalar_block)(std::uint64_t, std::uint64_t, float, float*)) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const __m512d two_pi = _mm512_set1_pd(kTwoPi), minus_two = _mm512_set1_pd(-2.0), inv = _mm512_set1_pd(0x1p-24);
  const __m512d one = _mm512_set1_pd(1.0);
  const __m256 sc = _mm256_set1_ps(scale);
  for (std::uint64_t b = 0; b < nbatches; ++b, out += 64) {
    const std::uint64_t counter = first_block + 16 * b;
    const Words16 w = philox16(key, counter);
    alignas(64) float v[4][16];  // v[k][j]: element k of block j
    unsigned bad_blocks = 0;
    for (int p = 0; p < 2; ++p) {
      for (int h = 0; h < 2; ++h) {  // blocks 8h .. 8h+7
        const __m256i w1 = h ? _mm512_extracti64x4_epi64(w.w[2 * p], 1) : _mm512_castsi512_si256(w.w[2 * p]);
        const __m256i w2 = h ? _mm512_extracti64x4_epi64(w.w[2 * p + 1], 1) : _mm512_castsi512_si256(w.w[2 * p + 1]);
        const __m512d u1 = _mm512_mul_pd(_mm512_add_pd(_mm512_cvtepi32_pd(_mm256_srli_epi32(w1, 8)), one), inv);
        const __m512d u2 = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm256_srli_epi32(w2, 8)), inv);
        const __m512d r = _mm512_sqrt_pd(_mm512_mul_pd(minus_two, _ZGVeN8v_log(u1)));
        const __m512d a = _mm512_mul_pd(two_pi, u2);
        const __m512d yc = _mm512_mul_pd(r, _ZGVeN8v_cos(a));
        const __m512d ys = _mm512_mul_pd(r, _ZGVeN8v_sin(a));
        bad_blocks |= (risky8(yc, r) | risky8(ys, r)) << (8 * h);
        _mm256_store_ps(&v[2 * p][8 * h], _mm512_cvtpd_ps(yc));
        _mm256_store_ps(&v[2 * p + 1][8 * h], _mm512_cvtpd_ps(ys));
      }
    }
    store_blocks8(v[0], v[1], v[2], v[3], sc, out);
    store_blocks8(v[0] + 8, v[1] + 8, v[2] + 8, v[3] + 8, sc, out + 32);
    for (int j = 0; bad_blocks; ++j, bad_blocks >>= 1)
      if (bad_blocks & 1) scalar_block(key, counter + static_cast<std::uint64_t>(j), scale, out + 4 * j);
  }
}

}  // namespace validate::detail
#endif
