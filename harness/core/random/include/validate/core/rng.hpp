#pragma once
// Counter-based RNG (Philox4x32-10) keyed by (seed, case, op, tensor). Element i of a stream is a
// pure function of the key and i, so any case can be generated alone, on any shard, device or
// LibTorch version with identical bits. Inputs never come from LibTorch's RNG for that reason.
#include <array>
#include <cstdint>
#include <string_view>

namespace validate {

// The code paths of Philox::fill_normal. All give the same bytes (the scalar path defines the
// stream; the vector paths recompute any value they cannot prove rounds identically); tests and
// bench_rng run each against the definition.
enum class RngPath { scalar, avx2, avx512 };
RngPath rng_best_path();  // the widest this CPU (and build) supports

class Philox {
 public:
  using Block = std::array<std::uint32_t, 4>;
  Philox(std::uint64_t seed, std::string_view case_name, std::string_view op, std::string_view tensor);
  explicit Philox(std::uint64_t key) : key_(key) {}

  Block block(std::uint64_t counter) const;  // 4 random words for block `counter`
  // Element i of the uniform [0, 1) stream (24-bit resolution, exactly representable in float).
  float uniform(std::uint64_t i) const;
  // Element i of the standard normal stream (Box-Muller on one block; computed in double and
  // rounded once to float so every libm gives the same float).
  float normal(std::uint64_t i) const;
  // Fills out[0..n) with normal(first + k) scaled; vectorised by blocks.
  void fill_normal(float* out, std::uint64_t n, float scale = 1.0f, std::uint64_t first = 0) const;
  // The same on a given path (a wider path than the CPU has falls back to a narrower one).
  void fill_normal_on(RngPath path, float* out, std::uint64_t n, float scale = 1.0f, std::uint64_t first = 0) const;
  void fill_uniform(float* out, std::uint64_t n, std::uint64_t first = 0) const;
  std::uint64_t key() const { return key_; }

 private:
  std::uint64_t key_;
};

// FNV-1a 64 of a string: stable across platforms, used to derive stream keys from names.
std::uint64_t fnv1a64(std::string_view s, std::uint64_t h = 0xcbf29ce484222325ull);

}  // namespace validate
