#pragma once
// The conversions bench_layout and bench_layout_torch time (docs/layouts.md, "Performance"), each
// >= 64 MB so that caches cannot hide memory traffic. compare_peers.py times numpy on the same list.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace validate::layout::bench {

struct BenchCase {
  const char* id;    // benchmark name stem, also used by compare_peers.py
  const char* axes;  // canonical axes
  std::vector<std::int64_t> shape;
  const char* spec;
  bool to_layout;  // true: canonical -> spec; false: spec -> canonical
  int elem_size;
};

inline const std::vector<BenchCase>& bench_cases() {
  static const std::vector<BenchCase> cases{
      {"act_f32/NCHW->NHWC", "NCHW", {8, 64, 256, 128}, "NHWC", true, 4},
      {"act_f32/NHWC->NCHW", "NCHW", {8, 64, 256, 128}, "NHWC", false, 4},
      {"act_f32/NCHW->CHWN:F", "NCHW", {8, 64, 256, 128}, "CHWN:F", true, 4},
      {"act_f32/CHWN:F->NCHW", "NCHW", {8, 64, 256, 128}, "CHWN:F", false, 4},
      {"act_f32/NCHW->NCHW+flip=HW", "NCHW", {8, 64, 256, 128}, "NCHW+flip=HW", true, 4},
      {"wgt_f32/OIHW->WHIO:F+flip=HW", "OIHW", {2048, 1024, 3, 3}, "WHIO:F+flip=HW", true, 4},
      {"wgt_f32/OIHW->HWIO:F+flip=HW", "OIHW", {2048, 1024, 3, 3}, "HWIO:F+flip=HW", true, 4},
      {"wgt_f32/OIHW->OHWI", "OIHW", {2048, 1024, 3, 3}, "OHWI", true, 4},
      {"mat_f32/151936x896 MK->KM", "MK", {151936, 896}, "KM", true, 4},
      {"act_bf16/NCHW->NHWC", "NCHW", {8, 64, 256, 256}, "NHWC", true, 2},
      {"act_f64/NCHW->NHWC", "NCHW", {8, 64, 128, 128}, "NHWC", true, 8},
  };
  return cases;
}

inline std::int64_t numel(const std::vector<std::int64_t>& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// A page-aligned buffer touched once, so page faults stay out of the timings.
struct Buffer {
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte[], Free> p;
  std::size_t size = 0;
  explicit Buffer(std::size_t n) : p(static_cast<std::byte*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096))), size(n) {
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>(i * 131 + 7);
  }
  std::byte* data() { return p.get(); }
};

}  // namespace validate::layout::bench
