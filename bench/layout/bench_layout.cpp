// bench_layout: our conversions against memcpy of the same bytes (docs/layouts.md, "Performance").
// Bytes/s counts each tensor's bytes once, as for memcpy, so the ratio of the two rates is the
// fraction of memcpy bandwidth a conversion reaches.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>

#include "bench_cases.hpp"
#include "validate/layout/convert.hpp"

namespace {

using validate::layout::bench::BenchCase;
using validate::layout::bench::Buffer;

void run_ours(benchmark::State& state, const BenchCase& c, int threads) {
  const auto bytes = static_cast<std::size_t>(validate::layout::bench::numel(c.shape)) * static_cast<std::size_t>(c.elem_size);
  Buffer src(bytes), dst(bytes);
  const auto spec = validate::layout::parse_spec(c.spec, c.axes);
  if (!spec) {
    state.SkipWithError(spec.message().c_str());
    return;
  }
  validate::layout::PermuteOptions opt;
  opt.threads = threads;
  const validate::Shape shape(c.shape.begin(), c.shape.end());
  for (auto _ : state) {
    if (c.to_layout)
      validate::layout::to_layout(src.data(), dst.data(), static_cast<std::size_t>(c.elem_size), shape, c.axes, *spec, opt);
    else
      validate::layout::from_layout(src.data(), dst.data(), static_cast<std::size_t>(c.elem_size), shape, c.axes, *spec, opt);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes));
}

void run_memcpy(benchmark::State& state, std::size_t bytes, int threads) {
  Buffer src(bytes), dst(bytes);
  for (auto _ : state) {
    if (threads <= 1) {
      std::memcpy(dst.data(), src.data(), bytes);
    } else {
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          const std::size_t b = bytes * static_cast<std::size_t>(t) / static_cast<std::size_t>(threads);
          const std::size_t e = bytes * static_cast<std::size_t>(t + 1) / static_cast<std::size_t>(threads);
          std::memcpy(dst.data() + b, src.data() + b, e - b);
        });
      for (auto& th : pool) th.join();
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes;
  for (const auto& c : validate::layout::bench::bench_cases()) {
    const auto bytes = static_cast<std::size_t>(validate::layout::bench::numel(c.shape)) * static_cast<std::size_t>(c.elem_size);
    if (std::find(sizes.begin(), sizes.end(), bytes) == sizes.end()) sizes.push_back(bytes);
    benchmark::RegisterBenchmark((std::string(c.id) + "/ours").c_str(), run_ours, c, 0)->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string(c.id) + "/ours_1thread").c_str(), run_ours, c, 1)
        ->UseRealTime()->Unit(benchmark::kMillisecond);
  }
  for (auto bytes : sizes) {
    const std::string stem = "memcpy/" + std::to_string(bytes);
    benchmark::RegisterBenchmark((stem + "/1thread").c_str(), run_memcpy, bytes, 1)->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((stem + "/2threads").c_str(), run_memcpy, bytes, 2)->UseRealTime()->Unit(benchmark::kMillisecond);
    // "ours" runs on every core: its ratio is against memcpy on the same number of threads.
    const int all = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    benchmark::RegisterBenchmark((stem + "/allthreads").c_str(), run_memcpy, bytes, all)
        ->UseRealTime()->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
