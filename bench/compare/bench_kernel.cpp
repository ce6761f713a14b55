// Google Benchmark micro-benchmarks of the metric kernel on in-memory arrays (no I/O): elements per
// second per logical dtype and thread count, to separate compute from memory bandwidth.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "validate/metrics/metrics.hpp"
#include "validate/metrics/rounding_bias.hpp"

using namespace validate;

namespace {

struct Data {
  std::vector<float> ref, run;
  std::vector<std::uint16_t> ref16, run16;  // the same values as float16 storage (<f2)
  explicit Data(std::size_t n) : ref(n), run(n), ref16(n), run16(n) {
    std::mt19937 gen(1);
    std::normal_distribution<float> d(0.f, 1.f);
    for (std::size_t i = 0; i < n; ++i) {
      ref[i] = round_to_dtype(d(gen), DType::bfloat16);
      run[i] = round_to_dtype(ref[i] * (1.f + 1e-3f * d(gen)), DType::bfloat16);
      ref16[i] = float_to_float16_bits(ref[i]);
      run16[i] = float_to_float16_bits(run[i]);
    }
  }
};

const Data& data() {
  static const Data d(std::size_t{1} << 24);  // 64 MB per side: larger than the caches
  return d;
}

void BM_Metrics(benchmark::State& state) {
  const Data& d = data();
  compare::MetricOptions opt;
  opt.logical = static_cast<DType>(state.range(0));
  opt.threads = static_cast<int>(state.range(1));
  opt.rtol = 5e-4;
  opt.ref_max_abs = 6.0;                            // skip the pre-pass: the kernel alone
  const bool half = opt.logical == DType::float16;  // float16 cases are stored as <f2
  const compare::ArrayView r =
      half ? compare::ArrayView{reinterpret_cast<const std::byte*>(d.ref16.data()), DType::float16,
                                static_cast<std::int64_t>(d.ref16.size()), false}
           : compare::ArrayView{reinterpret_cast<const std::byte*>(d.ref.data()), DType::float32,
                                static_cast<std::int64_t>(d.ref.size()), false};
  const compare::ArrayView x =
      half ? compare::ArrayView{reinterpret_cast<const std::byte*>(d.run16.data()), DType::float16,
                                static_cast<std::int64_t>(d.run16.size()), false}
           : compare::ArrayView{reinterpret_cast<const std::byte*>(d.run.data()), DType::float32,
                                static_cast<std::int64_t>(d.run.size()), false};
  for (auto _ : state) {
    auto st = compare::compute_metrics(r, x, opt);
    benchmark::DoNotOptimize(st);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(d.ref.size()));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(d.ref.size()) *
                          (half ? 4 : 8));
  state.SetLabel(compare::metrics_kernel_isa());
}

void BM_RefScan(benchmark::State& state) {
  const Data& d = data();
  const compare::ArrayView r{reinterpret_cast<const std::byte*>(d.ref.data()), DType::float32,
                             static_cast<std::int64_t>(d.ref.size()), false};
  for (auto _ : state)
    benchmark::DoNotOptimize(
        compare::scan_reference(r, DType::float32, static_cast<int>(state.range(0))));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(d.ref.size()) * 4);
}

// The rounding-bias estimate with its accumulation allowance, as compare takes it beside the metrics
// (one thread), on the default sweep's shapes at 2^24 elements: over independent elements (an
// output), and over the blocks of a gradient: a matmul grad_A [1024, 16384] by row (runs of 16384),
// its grad_B [524288, 32] by column (runs of one element) and a conv2d grad_input [1, 16384, 32, 32]
// by (N, H) (runs of 32, lag 2).
void BM_RoundingBias(benchmark::State& state) {
  const Data& d = data();
  static const std::vector<std::uint16_t> scale(d.ref.size(), float_to_float16_bits(0.01f));
  const auto n = static_cast<std::int64_t>(d.ref.size());
  const compare::ArrayView r{reinterpret_cast<const std::byte*>(d.ref.data()), DType::float32, n, false};
  const compare::ArrayView x{reinterpret_cast<const std::byte*>(d.run.data()), DType::float32, n, false};
  const compare::ArrayView s{reinterpret_cast<const std::byte*>(scale.data()), DType::float16, n, false};
  compare::BoundOptions o;
  o.n = 4608, o.scale_unit = 1;
  struct Layout {
    Shape shape;
    compare::BiasBlocks blocks;
  };
  static const Layout layouts[] = {{{1024, 16384}, {{0}, 0}}, {{524288, 32}, {{1}, 0}}, {{1, 16384, 32, 32}, {{0, 2}, 2}}};
  const auto k = state.range(0);
  const Shape shape = k == 0 ? Shape{n} : layouts[k - 1].shape;
  const compare::BiasBlocks* blocks = k == 0 ? nullptr : &layouts[k - 1].blocks;
  for (auto _ : state)
    benchmark::DoNotOptimize(compare::rounding_bias_and_accumulation(r, x, s, o, shape, blocks, 1e-6));
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * n * 10);
  state.SetLabel(k == 0 ? "output" : k == 1 ? "grad_A" : k == 2 ? "grad_B" : "grad_input");
}

}  // namespace

BENCHMARK(BM_RoundingBias)->ArgName("layout")->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Metrics)
    ->ArgNames({"dtype", "threads"})
    ->Args({static_cast<int>(DType::float32), 1})
    ->Args({static_cast<int>(DType::float32), 2})
    ->Args({static_cast<int>(DType::bfloat16), 1})
    ->Args({static_cast<int>(DType::bfloat16), 2})
    ->Args({static_cast<int>(DType::float16), 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_RefScan)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
