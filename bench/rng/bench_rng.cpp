// bench_rng [MIB_OF_FLOATS] [THREADS]: fills one stream of float32 normals three ways and prints
// GB/s (bytes of float32 written), best of 3:
//   definition  Philox::normal(i) per element (the scalar stream definition, as draws ran before)
//   fill 1      Philox::fill_normal on one thread (vector path where the CPU has AVX2)
//   fill N      fill_normal split over N threads, as generate draws a large input
// and checks that all three give the same bytes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
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
  const double t_one = best_of_3([&] { rng.fill_normal(one.data(), n, 0.5f); });
  const double t_many = best_of_3([&] {
    std::vector<std::thread> pool;
    const std::size_t chunk = (n / threads + 31) / 32 * 32;
    for (unsigned t = 0; t < threads; ++t) {
      const std::size_t b = std::min(n, t * chunk), e = std::min(n, b + chunk);
      pool.emplace_back([&, b, e] { rng.fill_normal(many.data() + b, e - b, 0.5f, b); });
    }
    for (auto& th : pool) th.join();
  });
  const bool same = std::memcmp(def.data(), one.data(), n * 4) == 0 && std::memcmp(def.data(), many.data(), n * 4) == 0;
  std::printf("float32 normals, %zu MiB, best of 3\n", mib);
  std::printf("definition (per element) %8.3f s %6.2f GB/s\n", t_def, gb / t_def);
  std::printf("fill_normal, 1 thread    %8.3f s %6.2f GB/s  %.1fx the definition\n", t_one, gb / t_one, t_def / t_one);
  std::printf("fill_normal, %u threads   %8.3f s %6.2f GB/s  %.1fx the definition\n", threads, t_many, gb / t_many,
              t_def / t_many);
  std::printf("bytes identical: %s\n", same ? "yes" : "NO");
  return same ? 0 : 1;
}
