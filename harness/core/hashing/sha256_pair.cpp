#include "validate/core/sha256_pair.hpp"

#include <cstdint>
#include <cstring>

#include "validate/core/sha256.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define VALIDATE_SHA_NI 1
#endif

namespace validate {

namespace {

std::string hex_of(const std::uint32_t h[8]) {
  static const char* hex = "0123456789abcdef";
  std::string s;
  s.reserve(64);
  for (int i = 0; i < 8; ++i)
    for (int sh = 28; sh >= 0; sh -= 4) s.push_back(hex[(h[i] >> sh) & 15]);
  return s;
}

constexpr std::size_t kVisitChunk = 256 << 10;  // a multiple of 64: every chunk but the last is whole blocks

// The file's digest as an OpenSSL stream, and the payload's into `pay` when given: both streams
// take each chunk while it is still in cache.
std::string visit_openssl(const Sha256Visit& m, Sha256* pay = nullptr) {
  const auto* p = static_cast<const unsigned char*>(m.payload);
  Sha256 file;
  file.update(m.header, m.header_size);
  for (std::size_t off = 0; off < m.payload_size; off += kVisitChunk) {
    const std::size_t n = m.payload_size - off < kVisitChunk ? m.payload_size - off : kVisitChunk;
    file.update(p + off, n);
    if (pay) pay->update(p + off, n);
    if (m.visit) m.visit(p + off, n);
  }
  return file.hex_digest();
}

Sha256Pair visit_pair_openssl(const Sha256Visit& m) {
  Sha256 pay;
  std::string file = visit_openssl(m, &pay);
  return {std::move(file), pay.hex_digest()};
}

}  // namespace

#ifdef VALIDATE_SHA_NI

bool sha256_cpu_has_sha_ni() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool sha = (b >> 29) & 1u;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    const bool sse41 = (c >> 19) & 1u, ssse3 = (c >> 9) & 1u;
    return sha && sse41 && ssse3;
  }();
  return has;
}

namespace {

alignas(16) const std::uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

struct State {
  std::uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
};

// Compresses `nblocks` 64-byte blocks into S states at once. The message schedule depends on the
// block alone, so it is computed once; the S round chains are independent, so interleaving them
// hides the latency of sha256rnds2 that bounds a single stream.
template <int S>
__attribute__((target("sha,sse4.1,ssse3"))) void compress(State* const* st, const unsigned char* p,
                                                          std::size_t nblocks) {
  const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  __m128i abef[S], cdgh[S];
  for (int s = 0; s < S; ++s) {
    // Registers hold the state as (A,B,E,F) and (C,D,G,H), highest lane first.
    __m128i abcd = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(st[s]->h)), 0xB1);
    __m128i efgh = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(st[s]->h + 4)), 0x1B);
    abef[s] = _mm_alignr_epi8(abcd, efgh, 8);
    cdgh[s] = _mm_blend_epi16(efgh, abcd, 0xF0);
  }
  for (std::size_t b = 0; b < nblocks; ++b, p += 64) {
    __m128i w[16];
    for (int i = 0; i < 4; ++i)
      w[i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i)), bswap);
    for (int i = 4; i < 16; ++i)
      w[i] = _mm_sha256msg2_epu32(
          _mm_add_epi32(_mm_sha256msg1_epu32(w[i - 4], w[i - 3]), _mm_alignr_epi8(w[i - 1], w[i - 2], 4)), w[i - 1]);
    __m128i save_abef[S], save_cdgh[S];
    for (int s = 0; s < S; ++s) save_abef[s] = abef[s], save_cdgh[s] = cdgh[s];
    for (int i = 0; i < 16; ++i) {
      const __m128i wk = _mm_add_epi32(w[i], _mm_load_si128(reinterpret_cast<const __m128i*>(kRound + 4 * i)));
      const __m128i wk_hi = _mm_shuffle_epi32(wk, 0x0E);
      // Two rounds each: afterwards the roles of the two registers are swapped back.
      for (int s = 0; s < S; ++s) cdgh[s] = _mm_sha256rnds2_epu32(cdgh[s], abef[s], wk);
      for (int s = 0; s < S; ++s) abef[s] = _mm_sha256rnds2_epu32(abef[s], cdgh[s], wk_hi);
    }
    for (int s = 0; s < S; ++s) {
      abef[s] = _mm_add_epi32(abef[s], save_abef[s]);
      cdgh[s] = _mm_add_epi32(cdgh[s], save_cdgh[s]);
    }
  }
  for (int s = 0; s < S; ++s) {
    __m128i feba = _mm_shuffle_epi32(abef[s], 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh[s], 0xB1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(st[s]->h), _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(st[s]->h + 4), _mm_alignr_epi8(dchg, feba, 8));
  }
}

// Two independent messages (two files) into two states, one block of each per step: each has its
// own message schedule, and the two round chains interleave as in compress<2> (one SHA-NI chain is
// bound by the latency of sha256rnds2, not by its throughput).
__attribute__((target("sha,sse4.1,ssse3"))) void compress_two(State& s0, const unsigned char* p0, State& s1,
                                                              const unsigned char* p1, std::size_t nblocks) {
  const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  State* st[2] = {&s0, &s1};
  const unsigned char* p[2] = {p0, p1};
  __m128i abef[2], cdgh[2];
  for (int s = 0; s < 2; ++s) {
    __m128i abcd = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(st[s]->h)), 0xB1);
    __m128i efgh = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(st[s]->h + 4)), 0x1B);
    abef[s] = _mm_alignr_epi8(abcd, efgh, 8);
    cdgh[s] = _mm_blend_epi16(efgh, abcd, 0xF0);
  }
  for (std::size_t b = 0; b < nblocks; ++b) {
    __m128i w[2][16];
    for (int s = 0; s < 2; ++s) {
      for (int i = 0; i < 4; ++i)
        w[s][i] = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p[s] + 64 * b + 16 * i)), bswap);
      for (int i = 4; i < 16; ++i)
        w[s][i] = _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32(w[s][i - 4], w[s][i - 3]),
                                                     _mm_alignr_epi8(w[s][i - 1], w[s][i - 2], 4)),
                                       w[s][i - 1]);
    }
    const __m128i save_abef[2] = {abef[0], abef[1]}, save_cdgh[2] = {cdgh[0], cdgh[1]};
    for (int i = 0; i < 16; ++i) {
      const __m128i k = _mm_load_si128(reinterpret_cast<const __m128i*>(kRound + 4 * i));
      __m128i wk[2], wk_hi[2];
      for (int s = 0; s < 2; ++s) {
        wk[s] = _mm_add_epi32(w[s][i], k);
        wk_hi[s] = _mm_shuffle_epi32(wk[s], 0x0E);
      }
      for (int s = 0; s < 2; ++s) cdgh[s] = _mm_sha256rnds2_epu32(cdgh[s], abef[s], wk[s]);
      for (int s = 0; s < 2; ++s) abef[s] = _mm_sha256rnds2_epu32(abef[s], cdgh[s], wk_hi[s]);
    }
    for (int s = 0; s < 2; ++s) {
      abef[s] = _mm_add_epi32(abef[s], save_abef[s]);
      cdgh[s] = _mm_add_epi32(cdgh[s], save_cdgh[s]);
    }
  }
  for (int s = 0; s < 2; ++s) {
    __m128i feba = _mm_shuffle_epi32(abef[s], 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh[s], 0xB1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(st[s]->h), _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(st[s]->h + 4), _mm_alignr_epi8(dchg, feba, 8));
  }
}

// Pads the last (< 64) bytes and appends the message length in bits, big-endian.
std::string finish(State& st, const unsigned char* tail, std::size_t tail_size, std::uint64_t total_bytes) {
  unsigned char buf[128] = {};
  std::memcpy(buf, tail, tail_size);
  buf[tail_size] = 0x80;
  const std::size_t nb = tail_size + 1 + 8 <= 64 ? 1 : 2;
  const std::uint64_t bits = total_bytes * 8;
  for (int i = 0; i < 8; ++i) buf[nb * 64 - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  State* one[1] = {&st};
  compress<1>(one, buf, nb);
  return hex_of(st.h);
}

}  // namespace

std::string sha256_hex_ni(const void* data, std::size_t size) {
  if (!sha256_cpu_has_sha_ni()) return sha256_hex(data, size);
  const auto* p = static_cast<const unsigned char*>(data);
  State st;
  State* one[1] = {&st};
  compress<1>(one, p, size / 64);
  return finish(st, p + size / 64 * 64, size % 64, size);
}

namespace {

// The payload's whole blocks from offset `off` (whole chunks before it already in the N states),
// each chunk visited right after it is hashed; returns the offset of the tail (< 64 bytes) that
// finish() pads.
template <int N>
std::size_t visit_blocks(State* const* st, const Sha256Visit& m, std::size_t off) {
  const auto* p = static_cast<const unsigned char*>(m.payload);
  for (; off + kVisitChunk <= m.payload_size; off += kVisitChunk) {
    compress<N>(st, p + off, kVisitChunk / 64);
    if (m.visit) m.visit(p + off, kVisitChunk);
  }
  const std::size_t rest = m.payload_size - off;
  compress<N>(st, p + off, rest / 64);
  if (rest && m.visit) m.visit(p + off, rest);
  return off + rest / 64 * 64;
}

// The rest of a visited hash from payload offset `off` (whole chunks before it already in `st`).
std::string visit_rest(State& st, const Sha256Visit& m, std::size_t off) {
  State* one[1] = {&st};
  const std::size_t tail = visit_blocks<1>(one, m, off);
  return finish(st, static_cast<const unsigned char*>(m.payload) + tail, m.payload_size - tail,
                m.header_size + m.payload_size);
}

void start(State& st, const Sha256Visit& m) {
  State* one[1] = {&st};
  compress<1>(one, static_cast<const unsigned char*>(m.header), m.header_size / 64);
}

}  // namespace

std::string sha256_header_payload_visit(const Sha256Visit& m) {
  if (!sha256_cpu_has_sha_ni() || m.header_size % 64 != 0) return visit_openssl(m);
  State st;
  start(st, m);
  return visit_rest(st, m, 0);
}

std::array<std::string, 2> sha256_header_payload_visit2(const Sha256Visit& a, const Sha256Visit& b) {
  if (!sha256_cpu_has_sha_ni() || a.header_size % 64 != 0 || b.header_size % 64 != 0)
    return {visit_openssl(a), visit_openssl(b)};
  State sa, sb;
  start(sa, a);
  start(sb, b);
  const auto* pa = static_cast<const unsigned char*>(a.payload);
  const auto* pb = static_cast<const unsigned char*>(b.payload);
  std::size_t off = 0;
  for (; off + kVisitChunk <= a.payload_size && off + kVisitChunk <= b.payload_size; off += kVisitChunk) {
    compress_two(sa, pa + off, sb, pb + off, kVisitChunk / 64);
    a.visit(pa + off, kVisitChunk);
    b.visit(pb + off, kVisitChunk);
  }
  return {visit_rest(sa, a, off), visit_rest(sb, b, off)};
}

Sha256Pair sha256_header_payload_visit_pair(const Sha256Visit& m) {
  if (!sha256_cpu_has_sha_ni() || m.header_size % 64 != 0) return visit_pair_openssl(m);
  State file, pay;
  start(file, m);
  State* both[2] = {&file, &pay};
  const std::size_t tail = visit_blocks<2>(both, m, 0);
  const unsigned char* t = static_cast<const unsigned char*>(m.payload) + tail;
  return {finish(file, t, m.payload_size - tail, m.header_size + m.payload_size),
          finish(pay, t, m.payload_size - tail, m.payload_size)};
}

#else
bool sha256_cpu_has_sha_ni() { return false; }
std::string sha256_hex_ni(const void* data, std::size_t size) { return sha256_hex(data, size); }
std::string sha256_header_payload_visit(const Sha256Visit& m) { return visit_openssl(m); }
std::array<std::string, 2> sha256_header_payload_visit2(const Sha256Visit& a, const Sha256Visit& b) {
  return {visit_openssl(a), visit_openssl(b)};
}
Sha256Pair sha256_header_payload_visit_pair(const Sha256Visit& m) { return visit_pair_openssl(m); }
#endif

Sha256Pair sha256_header_payload(const void* header, std::size_t header_size, const void* payload,
                                 std::size_t payload_size) {
  return sha256_header_payload_visit_pair({header, header_size, payload, payload_size, {}});
}

}  // namespace validate
