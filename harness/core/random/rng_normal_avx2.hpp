#pragma once
// Internal to rng.cpp: the AVX2 / AVX-512 + libmvec batches of Philox::fill_normal (rng_normal_avx2.cpp).
#include <cstdint>

#if defined(__x86_64__) && defined(__GLIBC__) && !defined(VALIDATE_NO_LIBMVEC) && (defined(__GNUC__) || defined(__clang__))
#define VALIDATE_RNG_AVX2 1
#else
#define VALIDATE_RNG_AVX2 0
#endif

namespace validate::detail {

#if VALIDATE_RNG_AVX2
bool normal_avx2_available();
// nbatches batches of 8 blocks from block `first_block` (32 floats each, times `scale`) into out.
// scalar_block(key, block, scale, out4) recomputes one block's 4 scaled values where the check
// says the vector result might round differently. The blocks must not cross a multiple of 2^32.
void normal_blocks_avx2(std::uint64_t key, std::uint64_t first_block, std::uint64_t nbatches, float scale,
                        float* out, void (*scalar_block)(std::uint64_t, std::uint64_t, float, float*));
// The same with AVX-512F/DQ: batches of 16 blocks (64 floats), identical bytes.
bool normal_avx512_available();
void normal_blocks_avx512(std::uint64_t key, std::uint64_t first_block, std::uint64_t nbatches, float scale,
                          float* out, void (*scalar_block)(std::uint64_t, std::uint64_t, float, float*));
#else
inline bool normal_avx2_available() { return false; }
inline bool normal_avx512_available() { return false; }
#endif

}  // namespace validate::detail
