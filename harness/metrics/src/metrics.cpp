#include "validate/metrics/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>

#include "metrics_kernel.hpp"

namespace validate::compare {

namespace detail {

void Partial::merge(const Partial& o) {
  compared += o.compared;
  zeros += o.zeros;
  sum_abs += o.sum_abs;
  sum_rel += o.sum_rel;
  max_abs = std::max(max_abs, o.max_abs);
  ref_max = std::max(ref_max, o.ref_max);
  max_rel = std::max(max_rel, o.max_rel);
  for (int c = 0; c < 2; ++c) {
    large_max[c] = std::max(large_max[c], o.large_max[c]);
    large_sum[c] += o.large_sum[c];
  }
  mom.merge(o.mom);
  nf.nan_ref += o.nf.nan_ref;
  nf.nan_run += o.nf.nan_run;
  nf.inf_ref += o.nf.inf_ref;
  nf.inf_run += o.nf.inf_run;
  nf.nan_mismatch += o.nf.nan_mismatch;
  nf.inf_mismatch += o.nf.inf_mismatch;
  if (nf.first_mismatch < 0) nf.first_mismatch = o.nf.first_mismatch;
  beyond += o.beyond;
  if (first_beyond < 0) first_beyond = o.first_beyond;
  // o covers later elements: it wins only when strictly worse (first element on ties).
  if (o.worst_abs.index >= 0 &&
      (worst_abs.index < 0 || o.worst_abs.abs_error > worst_abs.abs_error))
    worst_abs = o.worst_abs;
  if (o.worst_ulp.index >= 0 && (worst_ulp.index < 0 || o.worst_ulp.ulp > worst_ulp.ulp))
    worst_ulp = o.worst_ulp;
}

void HistScratch::flush(UlpHistogram& regular, UlpHistogram& near_zero) {
  for (int b = 0; b < UlpHistogram::kFineBins; ++b) {
    std::uint64_t r = 0, z = 0;
    for (int c = 0; c < kCopies; ++c) {
      r += h[c * kSlots + b];
      z += h[c * kSlots + UlpHistogram::kFineBins + b];
    }
    if (r) regular.add_bin(b, r);
    if (z) near_zero.add_bin(b, z);
  }
  std::fill(h.begin(), h.end(), 0u);
}

const KernelTable& kernels() {
  static const KernelTable* best = [] {
    // VALIDATE_COMPARE_ISA=generic|avx2|avx512 caps the choice (tests run every build this way).
    const char* env = std::getenv("VALIDATE_COMPARE_ISA");
    const std::string cap = env ? env : "";
    if (cap == "generic") return &kernels_generic();
#if defined(VALIDATE_HAVE_X86_KERNELS)
    __builtin_cpu_init();
    if (cap != "avx2" && __builtin_cpu_supports("avx512f")) return &kernels_avx512();
    if (__builtin_cpu_supports("avx2")) return &kernels_avx2();
#endif
    return &kernels_generic();
  }();
  return *best;
}

}  // namespace detail

namespace {

using detail::kBlock;
constexpr int kPrefetch = 2 * kBlock;  // elements ahead

int kernel_logical(DType d) {
  switch (d) {
    case DType::bfloat16:
      return 1;
    case DType::float16:
      return 2;
    default:
      return 0;  // float32; float64 is measured in float32, the finest a reference stores
  }
}

float min_normal(DType logical) {
  switch (logical) {
    case DType::float16:
      return 6.103515625e-05f;  // 2^-14
    case DType::bfloat16:
      return std::numeric_limits<float>::min();  // same exponent range
    default:
      return std::numeric_limits<float>::min();
  }
}

// Supplies blocks of one side as float32: straight from the map when the bytes already are what the
// kernel wants, else converted (and rounded to the logical dtype where asked) into a block buffer.
class Source {
 public:
  Source(const ArrayView& v, DType logical) : v_(v), logical_(logical) {
    const bool round = v.round_to_logical && logical != DType::float32;
    direct_ = v.storage == DType::float32 && !round && logical != DType::float16;
    round_ = round || (v.storage != DType::float16 && logical == DType::float16) ||
             v.storage == DType::float64;
  }
  bool direct() const { return direct_; }
  const float* get(std::int64_t start, int n, float* buf) const {
    if (direct_) return reinterpret_cast<const float*>(v_.data) + start;
    if (v_.storage == DType::float16) {
      detail::kernels().half_to_float(reinterpret_cast<const std::uint16_t*>(v_.data) + start, buf,
                                      n);
    } else if (v_.storage == DType::float64) {
      const double* p = reinterpret_cast<const double*>(v_.data) + start;
      for (int i = 0; i < n; ++i) buf[i] = static_cast<float>(p[i]);
    } else {
      std::memcpy(buf, reinterpret_cast<const float*>(v_.data) + start,
                  static_cast<std::size_t>(n) * 4);
    }
    if (round_ && logical_ != DType::float32 && logical_ != DType::float64)
      for (int i = 0; i < n; ++i) buf[i] = round_to_dtype(buf[i], logical_);
    return buf;
  }

 private:
  ArrayView v_;
  DType logical_;
  bool direct_ = false, round_ = false;
};

int thread_count(int requested) {
  if (requested > 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(std::min(hw, 64u));
}

// Runs body(thread, chunk) for chunks t, t+T, t+2T, ... on T threads (inline when one suffices).
template <class Body>
void for_chunks(std::int64_t nchunks, int threads, Body body) {
  const int t_count =
      static_cast<int>(std::min<std::int64_t>(threads, std::max<std::int64_t>(nchunks, 1)));
  if (t_count <= 1) {
    for (std::int64_t c = 0; c < nchunks; ++c) body(0, c);
    return;
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < t_count; ++t)
    pool.emplace_back([&, t] {
      for (std::int64_t c = t; c < nchunks; c += t_count) body(t, c);
    });
  for (auto& th : pool) th.join();
}

bool storage_ok(DType d) {
  return d == DType::float32 || d == DType::float16 || d == DType::float64;
}

// Count, max and sum from the exact bins (<= kExact) plus the exactly tracked large distances.
UlpSummary summarize(const UlpHistogram& h, std::uint32_t large_max, std::uint64_t large_sum) {
  UlpSummary s;
  const auto& f = h.fine();
  std::uint64_t sum = large_sum, count = 0, max = large_max;
  for (int b = 0; b < UlpHistogram::kFineBins; ++b) {
    count += f[static_cast<std::size_t>(b)];
    if (b <= UlpHistogram::kExact && f[static_cast<std::size_t>(b)]) {
      sum += static_cast<std::uint64_t>(b) * f[static_cast<std::size_t>(b)];
      max = std::max<std::uint64_t>(max, static_cast<std::uint64_t>(b));
    }
  }
  s.count = static_cast<std::int64_t>(count);
  s.max = max;
  s.mean = count ? static_cast<double>(sum) / static_cast<double>(count) : 0;
  s.p50 = h.percentile(0.5);
  s.p99 = h.percentile(0.99);
  s.p999 = h.percentile(0.999);
  s.histogram = h.coarse();
  return s;
}

}  // namespace

ArrayView view_of(const Tensor& t) { return ArrayView{t.bytes(), t.dtype(), t.numel(), false}; }

const char* metrics_kernel_isa() { return detail::kernels().isa; }

RefScan scan_reference(const ArrayView& ref, DType logical, int threads) {
  RefScan out;
  if (ref.numel == 0 || !storage_ok(ref.storage)) return out;
  const Source src(ref, logical);
  const std::int64_t chunk = std::int64_t{1} << 20;
  const std::int64_t nchunks = (ref.numel + chunk - 1) / chunk;
  std::vector<float> maxes(static_cast<std::size_t>(nchunks), 0.f);
  std::vector<std::int64_t> zeros(static_cast<std::size_t>(nchunks), 0);
  for_chunks(nchunks, thread_count(threads), [&](int, std::int64_t c) {
    alignas(64) float buf[kBlock];
    const std::int64_t begin = c * chunk, end = std::min(ref.numel, begin + chunk);
    float m = 0;
    std::int64_t z = 0;
    for (std::int64_t s = begin; s < end; s += kBlock) {
      const int n = static_cast<int>(std::min<std::int64_t>(kBlock, end - s));
      detail::kernels().scan(src.get(s, n, buf), n, m, z);
    }
    maxes[static_cast<std::size_t>(c)] = m;
    zeros[static_cast<std::size_t>(c)] = z;
  });
  for (std::int64_t c = 0; c < nchunks; ++c) {
    out.max_abs = std::max<double>(out.max_abs, maxes[static_cast<std::size_t>(c)]);
    out.zeros += zeros[static_cast<std::size_t>(c)];
  }
  return out;
}

Result<TensorStats> compute_metrics(const ArrayView& ref, const ArrayView& run,
                                    const MetricOptions& opt) {
  if (ref.numel != run.numel)
    return Error{"element counts differ: reference " + std::to_string(ref.numel) + ", run " +
                 std::to_string(run.numel)};
  if (!storage_ok(ref.storage) || !storage_ok(run.storage))
    return Error{"unsupported storage dtype (expected float32, float16 or float64)"};
  const int threads = thread_count(opt.threads);
  const DType logical = opt.logical;

  TensorStats st;
  st.numel = ref.numel;
  st.ref_max_abs =
      opt.ref_max_abs ? *opt.ref_max_abs : scan_reference(ref, logical, threads).max_abs;
  st.near_zero_floor =
      std::max<double>(opt.near_zero_fraction * st.ref_max_abs, min_normal(logical));

  detail::KernelParams p;
  p.floor = static_cast<float>(st.near_zero_floor);
  if (opt.atol || opt.rtol) {
    p.atol = static_cast<float>(opt.atol.value_or(0.0));
    p.rtol = static_cast<float>(opt.rtol.value_or(0.0));
  } else {
    p.atol = std::numeric_limits<float>::infinity();
    p.rtol = 0;
  }
  if (opt.max_ulp)
    p.max_ulp = static_cast<std::uint32_t>(std::min<std::uint64_t>(*opt.max_ulp, 0xffffffffu));

  const detail::BlockFn block = detail::kernels().block[kernel_logical(logical)];
  const Source rsrc(ref, logical), xsrc(run, logical);
  std::int64_t chunk = std::max<std::int64_t>(kBlock, opt.chunk_elements);
  chunk = (chunk + kBlock - 1) / kBlock * kBlock;
  const std::int64_t nchunks = (ref.numel + chunk - 1) / chunk;
  std::vector<detail::Partial> parts(static_cast<std::size_t>(nchunks));
  const int t_count =
      static_cast<int>(std::min<std::int64_t>(threads, std::max<std::int64_t>(nchunks, 1)));
  std::vector<UlpHistogram> hreg(static_cast<std::size_t>(t_count)),
      hnz(static_cast<std::size_t>(t_count));
  std::vector<detail::HistScratch> scratch(static_cast<std::size_t>(t_count));

  for_chunks(nchunks, t_count, [&](int t, std::int64_t c) {
    alignas(64) float rbuf[kBlock], xbuf[kBlock];
    detail::Partial& part = parts[static_cast<std::size_t>(c)];
    const std::int64_t begin = c * chunk, end = std::min(ref.numel, begin + chunk);
    detail::KernelParams pb = p;
    for (std::int64_t s = begin; s < end; s += kBlock) {
      const int n = static_cast<int>(std::min<std::int64_t>(kBlock, end - s));
      // Prefetch the next block of mapped data while this one is computed (within the chunk).
      pb.prefetch = rsrc.direct() && xsrc.direct() && s + kPrefetch + kBlock <= end ? kPrefetch : 0;
      block(rsrc.get(s, n, rbuf), xsrc.get(s, n, xbuf), n, s, pb, part,
            scratch[static_cast<std::size_t>(t)]);
    }
    scratch[static_cast<std::size_t>(t)].flush(hreg[static_cast<std::size_t>(t)],
                                               hnz[static_cast<std::size_t>(t)]);
  });

  detail::Partial all;
  for (auto& part : parts) all.merge(part);
  for (int t = 1; t < t_count; ++t) {
    hreg[0].merge(hreg[static_cast<std::size_t>(t)]);
    hnz[0].merge(hnz[static_cast<std::size_t>(t)]);
  }
  UlpHistogram empty;
  const UlpHistogram& HR = t_count > 0 ? hreg[0] : empty;
  const UlpHistogram& HZ = t_count > 0 ? hnz[0] : empty;

  st.compared = all.compared;
  st.ref_zeros = all.zeros;
  st.max_abs = all.max_abs;
  st.ref_max_abs_seen = all.ref_max;
  st.max_rel = all.max_rel;
  st.mean_abs = all.compared ? all.sum_abs / static_cast<double>(all.compared) : 0;
  st.mean_rel = all.compared ? all.sum_rel / static_cast<double>(all.compared) : 0;
  st.ulp = summarize(HR, all.large_max[0], all.large_sum[0]);
  st.ulp_near_zero = summarize(HZ, all.large_max[1], all.large_sum[1]);
  // Pearson: undefined when a side is constant. Report 1 when both are constant and equal, else 0,
  // so a min_pcc gate still means "the run varies with the reference".
  const double m2r = all.mom.m2r, m2x = std::max(0.0, all.mom.m2r + 2 * all.mom.cre + all.mom.m2e);
  if (m2r > 0 && m2x > 0) {
    st.pcc = (all.mom.m2r + all.mom.cre) / std::sqrt(m2r * m2x);
    st.pcc = std::max(-1.0, std::min(1.0, st.pcc));
  } else {
    st.pcc = (m2r == 0 && m2x == 0 && all.max_abs == 0) ? 1.0 : 0.0;
  }
  st.nonfinite = all.nf;
  st.beyond_tolerance = all.beyond;
  st.first_beyond = all.first_beyond;
  st.worst_abs = all.worst_abs;
  st.worst_ulp = all.worst_ulp;
  st.min_atol = all.max_abs;
  st.min_rtol = all.max_rel;
  return st;
}

}  // namespace validate::compare
