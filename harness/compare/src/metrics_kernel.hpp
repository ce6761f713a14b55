#pragma once
// Internal to the metric engine: partial statistics of a chunk and the per-ISA block kernels.
// metrics_kernel.inc is compiled twice (generic and, on x86, -mavx2) and picked at run time, so a
// binary built for any x86-64 uses AVX2 where the CPU has it. No -mfma: fused multiply-adds would
// change rounding and make results depend on the machine.
#include <cstdint>
#include <vector>

#include "validate/compare/metrics.hpp"
#include "validate/compare/ulp_histogram.hpp"

namespace validate::compare::detail {

constexpr int kBlock = 1024;  // elements per block: both sides of a block stay in L1

// Running mean, sums of squared deviations and co-deviation (Chan et al. pairwise merge).
struct Moments {
  double n = 0, mr = 0, mx = 0, m2r = 0, m2x = 0, crx = 0;
  void merge(const Moments& b) {
    if (b.n == 0) return;
    if (n == 0) {
      *this = b;
      return;
    }
    const double nn = n + b.n, dr = b.mr - mr, dx = b.mx - mx, f = n * b.n / nn;
    m2r += b.m2r + dr * dr * f;
    m2x += b.m2x + dx * dx * f;
    crx += b.crx + dr * dx * f;
    mr += dr * (b.n / nn);
    mx += dx * (b.n / nn);
    n = nn;
  }
};

struct KernelParams {
  float floor = 0;     // near-zero floor
  float atol = 0;      // +inf and rtol 0 when the tolerance test is off
  float rtol = 0;
  std::uint32_t max_ulp = 0xffffffffu;
};

struct Partial {
  std::int64_t compared = 0;
  std::int64_t zeros = 0;  // finite elements whose reference is +-0
  double sum_abs = 0, sum_rel = 0;
  float max_abs = 0, max_rel = 0;
  std::uint32_t max_ulp[2] = {0, 0};  // [0] regular, [1] near-zero
  std::uint64_t sum_ulp[2] = {0, 0};
  std::int64_t count[2] = {0, 0};
  Moments mom;
  NonFinite nf;
  std::int64_t beyond = 0, first_beyond = -1;
  Element worst_abs, worst_ulp;  // index -1: none yet

  void merge(const Partial& o);  // o covers later elements than *this
};

// Fine ULP histograms of the two classes plus a dump slot, in 4 interleaved copies so runs of equal
// distances do not serialise on one counter; flushed into UlpHistograms after each chunk.
struct HistScratch {
  static constexpr int kSlots = 2 * UlpHistogram::kFineBins + 1;
  std::vector<std::uint32_t> h = std::vector<std::uint32_t>(4 * kSlots, 0);
  void flush(UlpHistogram& regular, UlpHistogram& near_zero);
};

// n <= kBlock elements starting at flat index `base`.
using BlockFn = void (*)(const float* ref, const float* run, int n, std::int64_t base, const KernelParams& p,
                         Partial& out, HistScratch& hist);
using ScanFn = void (*)(const float* ref, std::int64_t n, float& max_abs, std::int64_t& zeros);
using HalfToFloatFn = void (*)(const std::uint16_t* in, float* out, int n);

struct KernelTable {
  const char* isa;
  BlockFn block[3];  // logical float32, bfloat16, float16
  ScanFn scan;
  HalfToFloatFn half_to_float;
};

const KernelTable& kernels_generic();
#if defined(VALIDATE_HAVE_AVX2_KERNEL)
const KernelTable& kernels_avx2();
#endif
const KernelTable& kernels();  // best for this CPU

}  // namespace validate::compare::detail
