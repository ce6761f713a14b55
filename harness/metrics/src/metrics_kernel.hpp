#pragma once
// Internal to the metric engine: partial statistics of a chunk and the per-ISA block kernels.
// metrics_kernel.inc is compiled per instruction set (generic and, on x86, AVX2 and AVX-512F) and
// picked at run time, so a binary built for any x86-64 uses the widest vectors the CPU has. No
// -mfma: fused multiply-adds would change rounding and make results depend on the machine.
#include <cstdint>
#include <vector>

#include "validate/metrics/metrics.hpp"
#include "validate/metrics/ulp_histogram.hpp"

namespace validate::compare::detail {

constexpr int kBlock = 1024;  // elements per block: both sides of a block stay in L1

// Means, sums of squared deviations and co-deviation of the reference r and the difference
// e = run - r (Chan et al. pairwise merge). Pearson(r, run) follows: var(run) = V + 2C + E,
// cov(r, run) = V + C with V, C, E = m2r, cre, m2e.
struct Moments {
  double n = 0, mr = 0, me = 0, m2r = 0, m2e = 0, cre = 0;
  void merge(const Moments& b) {
    if (b.n == 0) return;
    if (n == 0) {
      *this = b;
      return;
    }
    const double nn = n + b.n, dr = b.mr - mr, de = b.me - me, f = n * b.n / nn;
    m2r += b.m2r + dr * dr * f;
    m2e += b.m2e + de * de * f;
    cre += b.cre + dr * de * f;
    mr += dr * (b.n / nn);
    me += de * (b.n / nn);
    n = nn;
  }
};

struct KernelParams {
  float floor = 0;  // near-zero floor
  float atol = 0;   // +inf and rtol 0 when the tolerance test is off
  float rtol = 0;
  std::uint32_t max_ulp = 0xffffffffu;
  int prefetch = 0;  // elements ahead to prefetch (the caller knows where the data ends; 0 = off)
};

struct Partial {
  std::int64_t compared = 0;
  std::int64_t zeros = 0;  // finite elements whose reference is +-0
  double sum_abs = 0, sum_rel = 0;
  float max_abs = 0, max_rel = 0;
  float ref_max = 0;  // max |ref| over finite reference values (checks the metadata's max_abs)
  // ULP distances above UlpHistogram::kExact, per class ([0] regular, [1] near-zero): counts,
  // maxima and sums up to kExact are read from the exact bins of the histogram instead.
  std::uint32_t large_max[2] = {0, 0};
  std::uint64_t large_sum[2] = {0, 0};
  Moments mom;
  NonFinite nf;
  std::int64_t beyond = 0, first_beyond = -1;
  Element worst_abs, worst_ulp;  // index -1: none yet

  void merge(const Partial& o);  // o covers later elements than *this
};

// Fine ULP histograms of the two classes plus a dump slot, in kCopies interleaved copies so runs of
// equal distances do not serialise on one counter; flushed into UlpHistograms after each chunk.
struct HistScratch {
  static constexpr int kSlots = 2 * UlpHistogram::kFineBins + 1;
  static constexpr int kCopies = 16;  // >= the widest kernel's lanes
  std::vector<std::uint32_t> h = std::vector<std::uint32_t>(kCopies * kSlots, 0);
  void flush(UlpHistogram& regular, UlpHistogram& near_zero);
};

// n <= kBlock elements starting at flat index `base`.
using BlockFn = void (*)(const float* ref, const float* run, int n, std::int64_t base,
                         const KernelParams& p, Partial& out, HistScratch& hist);
using ScanFn = void (*)(const float* ref, std::int64_t n, float& max_abs, std::int64_t& zeros);
using HalfToFloatFn = void (*)(const std::uint16_t* in, float* out, int n);

// The error-bound check's common case (bounds.cpp, fast_pass): float32 reference and run, a scale
// (and a stored dL/dy choice term, or null) widened to float, every element's bound and worst case
// in double. The constants are those of bounds.cpp's BoundConstants; sqrt2_a = sqrt(2) a and
// up_rn = up rn as fast_pass forms them. Out: the largest err / bound and err / worst case, how
// many elements are beyond their bound, and whether every error and scale is finite.
// z_floor: pz holds an output's stored bias-after term W instead (BoundOptions::after): the bound
// is raised to W capped by the noise model's bound of that route (two stat + 2 (ud_b |y| + eta_b)),
// the worst case to W (a W that is not a finite value >= 0 raises nothing).
struct BoundFastParams {
  double ud, up_rn, ra, a, c, eta, gamma, two, unit, z_unit, sqrt2_a;
  bool z_floor = false;
  double ud_b = 0, eta_b = 0;
  // A stored dL/dy choice's stored roundings (bounds.hpp, stored_roundings): half a ULP of each
  // value, the power of two of its binade times half_scale (2^-p) and at least min_half (half the
  // subnormal spacing), plus eta2 (both sides' float32 underflow).
  double half_scale = 0, min_half = 0, eta2 = 0;
};
struct BoundFastOut {
  double max_over = 0, max_wc = 0;
  std::int64_t beyond = 0;
  bool finite = true;
};
// px: the run's own algorithm term of each element (BoundOptions::run_extra, from the chunk's start),
// or null; added to the bound and, as bound_pass forms it, to the worst case. Not with pz.
using BoundFastFn = void (*)(const float* pr, const float* pu, const float* ps, const float* pz, const double* px,
                             std::int64_t n, const BoundFastParams& k, BoundFastOut& out);

// rounding_bias.cpp's per-element terms of a float32 reference r and run x (n elements): e = sign(r)
// (x - r) and |r| where the element is weighed (r nonzero, both finite), +0.0 elsewhere; counts[0..2]
// += weighed, e < 0, e > 0. With a scale s (widened to float; null: none), accumulation_bias's terms
// too: t = per (|r| + rho) (rho = s unit, 0 where not finite) and m = |r| where r is nonzero and
// finite, +0.0 elsewhere. The same double operations per element on every ISA.
using BiasTermsFn = void (*)(const float* r, const float* x, const float* s, int n, double per, double unit,
                             double* e, double* a, double* t, double* m, std::int64_t* counts);

// rounding_bias.cpp's sums of those terms in kBiasLanes lanes (lane l of a sum: the elements whose
// index is l mod 8, in index order), the terms never stored: n elements, the first in lane lane0.
// sum[16]: the lanes of sum e, then of sum |r|; sq[24]: e e, e |r|, r r; acc[16] (null, or s null:
// none): t, m. The bits of adding bias_terms' outputs one by one into their lanes.
constexpr int kBiasLanes = 8;
using BiasLanesFn = void (*)(const float* r, const float* x, const float* s, int n, int lane0, double per,
                             double unit, double* sum, double* sq, double* acc, std::int64_t* counts);

struct KernelTable {
  const char* isa;
  BlockFn block[3];  // logical float32, bfloat16, float16
  ScanFn scan;
  HalfToFloatFn half_to_float;
  BoundFastFn bound_fast;
  BiasTermsFn bias_terms;
  BiasLanesFn bias_lanes;
};

const KernelTable& kernels_generic();
#if defined(VALIDATE_HAVE_X86_KERNELS)
const KernelTable& kernels_avx2();
const KernelTable& kernels_avx512();
#endif
const KernelTable& kernels();  // best for this CPU

}  // namespace validate::compare::detail
