// bench_rng [MIB_OF_FLOATS] [THREADS]: fills one stream of float32 normals three ways and prints
// GB/s (bytes of float32 written), best of 3:
//   definition  Philox::normal(i) per element (the scalar stream definition, as draws ran before)
//   fill 1      Philox::fill_normal_on(path) on one thread, for each vector path the CPU has
//               (AVX2: 8 blocks a batch; AVX-512: 16)
//   fill N      fill_normal (the widest path) split over N threads, as generate draws a large input
// and checks that all give the same bytes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "validate/core/rng.hpp"

using Clock = std::chrono::steady_clock;

template <class F>
double best_of_3(F f) {
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    auto t = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t).count());
  }
  return best;
}

int main(int argc, char** argv) {
  const std::size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  const unsigned threads = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : std::max(1u, std::thread::hardware_concurrency());
  const std::size_t n = mib * (1u << 20) / 4;
  const validate::Philox rng(42, "k0072_ic008", "conv2d", "input");
  std::vector<float> def(n), one(n), many(n);
  const double gb = static_cast<double>(n) * 4 / 1e9;
  const double t_def = best_of_3([&] {
    for (std::size_t i = 0; i < n; ++i) def[i] = rng.normal(i) * 0.5f;
  });
  bool same = true;
  std::vector<std::pair<const char*, double>> one_rates;
  for (auto [name, path] : {std::pair{"avx2", validate::RngPath::avx2}, std::pair{"avx512", validate::RngPath::avx512}}) {
    if (path == validate::RngPath::avx512 && validate::rng_best_path() != validate::RngPath::avx512) continue;
    if (validate::rng_best_path() == validate::RngPath::scalar) continue;
    std::fill(one.begin(), one.end(), 0.0f);
    one_rates.emplace_back(name, best_of_3([&] { rng.fill_normal_on(path, one.data(), n, 0.5f); }));
    same = same && std::memcmp(def.data(), one.data(), n * 4) == 0;
  }
  const double t_many = best_of_3([&] {
    std::vector<std::thread> pool;
    const std::size_t chunk = (n / threads + 63) / 64 * 64;
    for (unsigned t = 0; t < threads; ++t) {
      const std::size_t b = std::min(n, t * chunk), e = std::min(n, b + chunk);
      pool.emplace_back([&, b, e] { rng.fill_normal(many.data() + b, e - b, 0.5f, b); });
    }
    for (auto& th : pool) th.join();
  });
  same = same && std::memcmp(def.data(), many.data(), n * 4) == 0;
  std::printf("float32 normals, %zu MiB, best of 3\n", mib);
  std::printf("definition (per element) %8.3f s %6.2f GB/s\n", t_def, gb / t_def);
  for (auto [name, t_one] : one_rates)
    std::printf("fill_normal %-6s 1 thread %8.3f s %6.2f GB/s  %.1fx the definition\n", name, t_one, gb / t_one,
                t_def / t_one);
  std::printf("fill_normal, %u threads   %8.3f s %6.2f GB/s  %.1fx the definition\n", threads, t_many, gb / t_many,
              t_def / t_many);
  std::printf("bytes identical: %s\n", same ? "yes" : "NO");
  return same ? 0 : 1;
}
