// bench_layout_torch: the same conversions as bench_layout done the LibTorch way,
// x.flip(dims).permute(order).contiguous() (flip copies: LibTorch has no negative strides), so the
// side-by-side table can set ours against LibTorch on identical shapes and bytes.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <thread>

#include <torch/torch.h>

#include "bench_cases.hpp"
#include "validate/layout/convert.hpp"

namespace {

using validate::layout::bench::BenchCase;

torch::Dtype dtype_of(int elem_size) {
  return elem_size == 2 ? torch::kBFloat16 : elem_size == 8 ? torch::kFloat64 : torch::kFloat32;
}

void run_torch(benchmark::State& state, const BenchCase& c) {
  const auto spec = validate::layout::parse_spec(c.spec, c.axes);
  if (!spec) {
    state.SkipWithError(spec.message().c_str());
    return;
  }
  const validate::Shape shape(c.shape.begin(), c.shape.end());
  const auto p = validate::layout::placement(*spec, c.axes, shape);
  std::vector<std::int64_t> flips, order(p.memory_axes.begin(), p.memory_axes.end()), inverse(order.size());
  for (std::size_t a = 0; a < p.flipped.size(); ++a)
    if (p.flipped[a]) flips.push_back(static_cast<std::int64_t>(a));
  for (std::size_t t = 0; t < order.size(); ++t) inverse[static_cast<std::size_t>(order[t])] = static_cast<std::int64_t>(t);
  const bool permuted = !std::is_sorted(order.begin(), order.end());
  const auto opts = torch::TensorOptions().dtype(dtype_of(c.elem_size));
  // canonical -> layout memory: flip canonical axes, then walk them in memory order.
  // layout memory -> canonical: view the memory shape in canonical axis order, then flip.
  torch::Tensor x = c.to_layout ? torch::rand(shape, torch::TensorOptions().dtype(torch::kFloat32)).to(opts)
                                : torch::rand(p.memory_shape, torch::TensorOptions().dtype(torch::kFloat32)).to(opts);
  for (auto _ : state) {
    torch::Tensor y;
    if (c.to_layout) {
      y = flips.empty() ? x : x.flip(flips);
      if (permuted) y = y.permute(order).contiguous();
    } else {
      y = permuted ? x.permute(inverse) : x;
      y = flips.empty() ? y.contiguous() : y.flip(flips);
    }
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * x.numel() * c.elem_size);
  state.SetLabel("torch threads " + std::to_string(at::get_num_threads()));
}

}  // namespace

int main(int argc, char** argv) {
  // Give LibTorch every core, as ours gets: the comparison is of implementations, not thread counts.
  at::set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  for (const auto& c : validate::layout::bench::bench_cases())
    benchmark::RegisterBenchmark((std::string(c.id) + "/torch").c_str(), run_torch, c)->UseRealTime()->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
