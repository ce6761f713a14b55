// Bandwidth of validate::gpu layout conversions vs a device-to-device cudaMemcpy of the same bytes.
//
//   bench_gpu_permute [--reps N]
//
// Each row converts a canonical tensor to a layout with gpu::to_layout (the runner's path), timed
// with CUDA events: 3 warm-up runs, then the median of N (default 20). Rows marked back convert
// layout -> canonical (what the runner does with every result). GB/s counts each tensor's
// bytes once, as docs/layouts.md does for the CPU engine; the copy reads and writes them, so the
// DRAM traffic is twice that. "% of memcpy" compares with cudaMemcpyAsync device-to-device of the
// same size, timed the same way.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "validate/gpu/gpu.hpp"
#include "validate/layout/layout.hpp"

namespace {

using namespace validate;

struct Case {
  const char* name;
  const char* axes;
  const char* spec;
  Shape shape;
  DType dtype;
  bool back;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

template <class F>
Result<double> time_ms(F&& f, int reps) {
  cudaEvent_t a = nullptr, b = nullptr;
  VALIDATE_GPU_TRY(cudaEventCreate(&a));
  VALIDATE_GPU_TRY(cudaEventCreate(&b));
  std::vector<double> t;
  Status st;
  for (int i = 0; i < reps + 3 && st; ++i) {
    st = VALIDATE_GPU_CHECK(cudaEventRecord(a));
    if (st) st = f();
    if (st) st = VALIDATE_GPU_CHECK(cudaEventRecord(b));
    if (st) st = VALIDATE_GPU_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    if (st) st = VALIDATE_GPU_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 3) t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  if (!st) return st;
  return median(t);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--reps N]\n", argv[0]);
      return 2;
    }
  }
  auto dev = gpu::open_device(0);
  if (!dev) {
    std::printf("bench_gpu_permute: skipped: no CUDA device: %s\n", dev.message().c_str());
    return 0;
  }
  // back: layout -> canonical (the download side), else canonical -> layout.
  const Case cases[] = {
      {"act_f32/NCHW->NHWC", "NCHW", "NHWC", {16, 64, 128, 128}, DType::float32, false},
      {"act_f32/NHWC->NCHW", "NCHW", "NHWC", {16, 64, 128, 128}, DType::float32, true},
      {"act_f32/NCHW->CHWN:F", "NCHW", "CHWN:F", {16, 64, 128, 128}, DType::float32, false},
      {"act_f32/CHWN:F->NCHW", "NCHW", "CHWN:F", {16, 64, 128, 128}, DType::float32, true},
      {"act_f32/NCHW->NCHW+flip=HW",
       "NCHW",
       "NCHW+flip=HW",
       {16, 64, 128, 128},
       DType::float32,
       false},
      {"wgt_f32/OIHW->WHIO:F+flip=HW",
       "OIHW",
       "WHIO:F+flip=HW",
       {2048, 1024, 3, 3},
       DType::float32,
       false},
      {"wgt_f32/OIHW->HWIO:F+flip=HW",
       "OIHW",
       "HWIO:F+flip=HW",
       {2048, 1024, 3, 3},
       DType::float32,
       false},
      {"wgt_f32/OIHW->OHWI", "OIHW", "OHWI", {2048, 1024, 3, 3}, DType::float32, false},
      {"wgt_f32/OHWI->OIHW", "OIHW", "OHWI", {2048, 1024, 3, 3}, DType::float32, true},
      {"mat_f32/151936x896 MK->KM", "MK", "KM", {151936, 896}, DType::float32, false},
      {"mat_bf16/151936x896 MK->KM", "MK", "KM", {151936, 896}, DType::bfloat16, false},
      {"act_bf16/NCHW->NHWC", "NCHW", "NHWC", {16, 128, 128, 128}, DType::bfloat16, false},
      {"act_bf16/NHWC->NCHW", "NCHW", "NHWC", {16, 128, 128, 128}, DType::bfloat16, true},
      {"act_bf16/NCHW->CHWN:F", "NCHW", "CHWN:F", {16, 128, 128, 128}, DType::bfloat16, false},
      {"wgt_bf16/OIHW->WHIO:F+flip=HW",
       "OIHW",
       "WHIO:F+flip=HW",
       {2048, 2048, 3, 3},
       DType::bfloat16,
       false},
      {"wgt_bf16/OIHW->OHWI", "OIHW", "OHWI", {2048, 2048, 3, 3}, DType::bfloat16, false},
      {"act_f64/NCHW->NHWC", "NCHW", "NHWC", {16, 32, 128, 128}, DType::float64, false},
      // The default sweep's largest case (ic = 8192, 32 x 32, 32 output channels): 32 MiB and
      // 9 MiB, where launch latency starts to weigh on memcpy and the kernels alike.
      {"sweep_f32/NCHW->NHWC", "NCHW", "NHWC", {1, 8192, 32, 32}, DType::float32, false},
      {"sweep_f32/NHWC->NCHW", "NCHW", "NHWC", {1, 8192, 32, 32}, DType::float32, true},
      {"sweep_f32/NCHW->CHWN:F", "NCHW", "CHWN:F", {1, 8192, 32, 32}, DType::float32, false},
      {"sweep_f32/OIHW->OHWI", "OIHW", "OHWI", {32, 8192, 3, 3}, DType::float32, false},
      {"sweep_f32/OHWI->OIHW", "OIHW", "OHWI", {32, 8192, 3, 3}, DType::float32, true},
      {"sweep_f32/OIHW->WHIO:F+flip=HW",
       "OIHW",
       "WHIO:F+flip=HW",
       {32, 8192, 3, 3},
       DType::float32,
       false},
      {"sweep_bf16/NCHW->NHWC", "NCHW", "NHWC", {1, 8192, 32, 32}, DType::bfloat16, false},
      {"sweep_bf16/OHWI->OIHW", "OIHW", "OHWI", {32, 8192, 3, 3}, DType::bfloat16, true},
  };
  std::printf(
      "GPU: %s (sm_%d%d, %d SMs), CUDA runtime %d, driver %d; median of %d runs after 3 "
      "warm-ups\n\n",
      dev->name.c_str(), dev->cc_major, dev->cc_minor, dev->multiprocessors, dev->runtime_version,
      dev->driver_version, reps);
  std::printf("| conversion | size | kernel | memcpy GB/s | ours GB/s | ours / memcpy |\n");
  std::printf("|---|---:|---|---:|---:|---:|\n");
  int failures = 0;
  for (const auto& c : cases) {
    auto spec = layout::parse_spec(c.spec, c.axes);
    if (!spec) {
      std::fprintf(stderr, "%s: %s\n", c.name, spec.message().c_str());
      return 2;
    }
    const std::size_t elem = dtype_size(c.dtype);
    const std::size_t bytes = static_cast<std::size_t>(shape_numel(c.shape)) * elem;
    auto src = gpu::DeviceBuffer::allocate(bytes, "source"),
         dst = gpu::DeviceBuffer::allocate(bytes, "destination");
    if (!src || !dst) {
      std::printf("| %s | %.0f MiB | - | - | - | %s |\n", c.name, bytes / 1048576.0,
                  (!src ? src : dst).message().c_str());
      ++failures;
      continue;
    }
    (void)src->fill_zero();
    const auto g = c.back ? layout::from_layout_gather(layout::placement(*spec, c.axes, c.shape))
                          : layout::to_layout_gather(layout::placement(*spec, c.axes, c.shape));
    const auto plan = gpu::plan_permute(g.dst_shape, g.src_strides, g.src_offset, elem);
    auto ours = time_ms(
        [&] {
          return gpu::permute_copy(src->data(), dst->data(), elem, g.dst_shape, g.src_strides,
                                   g.src_offset);
        },
        reps);
    auto copy = time_ms(
        [&] {
          return VALIDATE_GPU_CHECK(
              cudaMemcpyAsync(dst->data(), src->data(), bytes, cudaMemcpyDeviceToDevice));
        },
        reps);
    if (!ours || !copy) {
      std::printf("| %s | %.0f MiB | %s | - | - | %s |\n", c.name, bytes / 1048576.0,
                  gpu::kernel_name(plan.kernel), (!ours ? ours.message() : copy.message()).c_str());
      ++failures;
      continue;
    }
    const double gbs = bytes / (*ours * 1e-3) / 1e9, mgbs = bytes / (*copy * 1e-3) / 1e9;
    std::printf("| %s | %.0f MiB | %s | %.0f | %.0f | %.0f%% |\n", c.name, bytes / 1048576.0,
                gpu::kernel_name(plan.kernel), mgbs, gbs, 100.0 * gbs / mgbs);
  }
  std::printf(
      "\nGB/s = tensor bytes / time (each byte read once and written once: DRAM traffic is twice "
      "this).\n");
  return failures ? 1 : 0;
}
