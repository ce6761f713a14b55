#pragma once
// Per-tensor error statistics, computed in one streaming pass over memory-mapped data.
//
// Definitions (docs/compare.md has the long form):
//  - Elements where either side is NaN or +-Inf are "non-finite". They agree when both are NaN or
//    both are the same infinity; any other combination is a mismatch, which always fails.
//    Non-finite elements are left out of every other statistic.
//  - near-zero floor = near_zero_fraction * max|ref| (default 1%), never below the logical dtype's
//    smallest normal. Elements with |ref| < floor are "near-zero": their ULP distances go to a
//    separate summary, because near a cancellation ULPs measure nothing but the cancellation.
//  - relative error = |run - ref| / max(|ref|, floor): the floor is the guard that keeps it finite
//    and meaningful for references at or near zero.
//  - ULP distance: in the logical dtype (see ulp.hpp), both values rounded to it first.
//  - an element is within tolerance when |run - ref| <= atol OR |run - ref| <= rtol * max(|ref|,
//    floor) (each only when set), and, for elements that are not near-zero, ULP <= max_ulp (when
//    set). Non-finite mismatches are always beyond tolerance.
//  - Pearson correlation: accumulated in double, centred per block of 1024 elements and merged
//    with Chan's pairwise update, so a large common offset does not cancel away the variance.
//
// The pass splits the tensor into chunks taken by `threads` threads; each chunk keeps its own
// partial statistics, merged in chunk order, so results do not depend on the thread count.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "validate/metrics/ulp_histogram.hpp"
#include "validate/core/dtype.hpp"
#include "validate/core/result.hpp"
#include "validate/core/tensor.hpp"

namespace validate::compare {

// Elements in memory: float32, float16 or float64 storage, C order.
struct ArrayView {
  const std::byte* data = nullptr;
  DType storage = DType::float32;
  std::int64_t numel = 0;
  // Round every value to the logical dtype before measuring (an oracle: "rounded to the logical
  // dtype" is the best any stack of that dtype can do). float64 storage is always rounded.
  bool round_to_logical = false;
};
ArrayView view_of(const Tensor& t);

struct MetricOptions {
  DType logical = DType::float32;         // the dtype ULPs are measured in
  double near_zero_fraction = 0.01;       // floor = fraction * max|ref|
  std::optional<double> ref_max_abs;      // when known (metadata), skips the pre-pass over ref
  std::optional<double> atol, rtol;       // element tolerance; unset = not part of the test
  std::optional<std::uint64_t> max_ulp;   // for elements that are not near-zero
  int threads = 0;                        // 0: std::thread::hardware_concurrency()
  std::int64_t chunk_elements = 1 << 18;  // elements per work unit (a multiple of 1024)
};

struct UlpSummary {
  std::int64_t count = 0;  // elements in this class (finite on both sides)
  std::uint64_t max = 0;
  double mean = 0;
  std::uint64_t p50 = 0, p99 = 0, p999 = 0;  // nearest-rank, from the fine histogram
  std::vector<std::uint64_t> histogram;      // coarse bins 0, 1, 2, 3-4, 5-8, ... (UlpHistogram)
};

struct Element {
  std::int64_t index = -1;  // flat C-order index; -1 when there is none
  double ref = 0, run = 0, abs_error = 0;
  std::uint64_t ulp = 0;
};

struct NonFinite {
  std::int64_t nan_ref = 0, nan_run = 0, inf_ref = 0, inf_run = 0;
  std::int64_t nan_mismatch = 0, inf_mismatch = 0;
  std::int64_t first_mismatch = -1;  // flat index of the first mismatching element
  std::int64_t mismatches() const { return nan_mismatch + inf_mismatch; }
};

struct TensorStats {
  std::int64_t numel = 0;
  std::int64_t compared = 0;  // finite on both sides
  double ref_max_abs = 0, near_zero_floor = 0;  // ref_max_abs: as given (metadata) or scanned
  // max |ref| over the finite reference values, measured by the pass itself. compare checks it
  // against the metadata's max_abs that set the floor: an inflated max_abs (1e30) made every
  // element "near zero" and passed a run off by 0.3 everywhere.
  double ref_max_abs_seen = 0;
  std::int64_t ref_zeros = 0;  // elements whose reference is exactly +-0
  double max_abs = 0, mean_abs = 0;
  double max_rel = 0, mean_rel = 0;
  UlpSummary ulp;            // elements with |ref| >= floor
  UlpSummary ulp_near_zero;  // elements with |ref| < floor
  double pcc = 1;            // see metrics.cpp: 1 when both sides are constant and equal
  NonFinite nonfinite;
  std::int64_t beyond_tolerance = 0;
  std::int64_t first_beyond = -1;
  Element worst_abs;    // largest |run - ref| (first on ties)
  Element worst_ulp;    // largest ULP among elements that are not near-zero
  double min_atol = 0;  // the smallest atol that would pass alone (= max_abs)
  double min_rtol = 0;  // the smallest rtol that would pass alone (= max_rel)

  double ref_zero_fraction() const {
    return numel ? static_cast<double>(ref_zeros) / static_cast<double>(numel) : 0;
  }
  std::uint64_t max_ulp_any() const {
    return ulp.max > ulp_near_zero.max ? ulp.max : ulp_near_zero.max;
  }
};

// Streams over both arrays once (plus a pass over ref for max|ref| unless given).
// Errors: element counts differ, unsupported storage dtype.
Result<TensorStats> compute_metrics(const ArrayView& ref, const ArrayView& run,
                                    const MetricOptions& opt);

// The pre-pass on its own: max |ref| over finite values and the count of exact zeros.
struct RefScan {
  double max_abs = 0;
  std::int64_t zeros = 0;
};
RefScan scan_reference(const ArrayView& ref, DType logical, int threads = 0);

// Which instruction set the kernel dispatched to on this machine ("avx2" or "generic").
const char* metrics_kernel_isa();

}  // namespace validate::compare
