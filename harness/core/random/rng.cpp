#include "validate/core/rng.hpp"

#include <algorithm>
#include <cmath>

#include "rng_normal_avx2.hpp"

namespace validate {

std::uint64_t fnv1a64(std::string_view s, std::uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

static std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

Philox::Philox(std::uint64_t seed, std::string_view case_name, std::string_view op, std::string_view tensor) {
  // '/' separators keep ("ab","c") and ("a","bc") apart.
  std::uint64_t h = fnv1a64(case_name);
  h = fnv1a64("/", h);
  h = fnv1a64(op, h);
  h = fnv1a64("/", h);
  h = fnv1a64(tensor, h);
  key_ = splitmix64(seed ^ splitmix64(h));
}

Philox::Block Philox::block(std::uint64_t counter) const {
  // Philox4x32-10 (Salmon et al., SC'11): counter (ctr_lo, ctr_hi, 0, 0), key (k0, k1).
  constexpr std::uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  std::uint32_t c0 = static_cast<std::uint32_t>(counter), c1 = static_cast<std::uint32_t>(counter >> 32);
  std::uint32_t c2 = 0, c3 = 0;
  std::uint32_t k0 = static_cast<std::uint32_t>(key_), k1 = static_cast<std::uint32_t>(key_ >> 32);
  for (int r = 0; r < 10; ++r) {
    std::uint64_t p0 = static_cast<std::uint64_t>(M0) * c0;
    std::uint64_t p1 = static_cast<std::uint64_t>(M1) * c2;
    std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    std::uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += W0;
    k1 += W1;
  }
  return {c0, c1, c2, c3};
}

static float to_unit(std::uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }

float Philox::uniform(std::uint64_t i) const { return to_unit(block(i / 4)[i % 4]); }

static void box_muller(const Philox::Block& b, float out[4]) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (int p = 0; p < 2; ++p) {
    // u1 in (0, 1] so log(u1) is finite.
    double u1 = (static_cast<double>(b[2 * p] >> 8) + 1.0) * (1.0 / 16777216.0);
    double u2 = static_cast<double>(b[2 * p + 1] >> 8) * (1.0 / 16777216.0);
    double r = std::sqrt(-2.0 * std::log(u1));
    out[2 * p] = static_cast<float>(r * std::cos(kTwoPi * u2));
    out[2 * p + 1] = static_cast<float>(r * std::sin(kTwoPi * u2));
  }
}

float Philox::normal(std::uint64_t i) const {
  float v[4];
  box_muller(block(i / 4), v);
  return v[i % 4];
}

namespace {
// One block's four normals, scaled: the definition of the stream, and the vector path's fallback.
void scalar_normal_block(std::uint64_t key, std::uint64_t block, float scale, float* out4) {
  float v[4];
  box_muller(Philox(key).block(block), v);
  for (int j = 0; j < 4; ++j) out4[j] = v[j] * scale;
}
}  // namespace

RngPath rng_best_path() {
  if (detail::normal_avx512_available()) return RngPath::avx512;
  if (detail::normal_avx2_available()) return RngPath::avx2;
  return RngPath::scalar;
}

void Philox::fill_normal(float* out, std::uint64_t n, float scale, std::uint64_t first) const {
  static const RngPath best = rng_best_path();
  fill_normal_on(best, out, n, scale, first);
}

void Philox::fill_normal_on(RngPath path, float* out, std::uint64_t n, float scale, std::uint64_t first) const {
  float v[4];
  std::uint64_t i = 0;
  // Up to the first whole block, then batches of 16 or 8 blocks on the vector paths, then the tail.
  while (i < n && (first + i) % 4 != 0) {
    std::uint64_t g = first + i;
    box_muller(block(g / 4), v);
    for (std::uint64_t j = g % 4; j < 4 && i < n; ++j, ++i) out[i] = v[j] * scale;
  }
#if VALIDATE_RNG_AVX2
  // Batches of `width` blocks; a batch shares the counter's high word, so none may straddle a
  // multiple of 2^32 blocks (the scalar tail takes the few blocks before one).
  const auto run = [&](std::uint64_t width, auto kernel) {
    std::uint64_t block0 = (first + i) / 4, batches = (n - i) / (4 * width);
    while (batches) {
      const std::uint64_t to_wrap = ((block0 | 0xffffffffull) + 1 - block0) / width;
      const std::uint64_t nb = std::min(batches, to_wrap);
      if (nb == 0) break;
      kernel(key_, block0, nb, scale, out + i, &scalar_normal_block);
      i += nb * 4 * width;
      block0 += nb * width;
      batches -= nb;
    }
  };
  if (path == RngPath::avx512 && detail::normal_avx512_available()) run(16, &detail::normal_blocks_avx512);
  if (path != RngPath::scalar && detail::normal_avx2_available()) run(8, &detail::normal_blocks_avx2);
#else
  (void)path;
#endif
  while (i < n) {
    std::uint64_t g = first + i;
    box_muller(block(g / 4), v);
    for (std::uint64_t j = g % 4; j < 4 && i < n; ++j, ++i) out[i] = v[j] * scale;
  }
}

void Philox::fill_uniform(float* out, std::uint64_t n, std::uint64_t first) const {
  std::uint64_t i = 0;
  while (i < n) {
    std::uint64_t g = first + i;
    Block b = block(g / 4);
    for (std::uint64_t j = g % 4; j < 4 && i < n; ++j, ++i) out[i] = to_unit(b[j]);
  }
}

}  // namespace validate
