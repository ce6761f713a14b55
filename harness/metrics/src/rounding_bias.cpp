// The rounding-bias estimate of a tensor (rounding_bias.hpp).
#include "validate/metrics/rounding_bias.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "metrics_kernel.hpp"

namespace validate::compare {

namespace {

// Every sum is taken in eight lanes (rounding_bias.hpp): element i of the tensor goes to lane
// i mod 8, each lane adds its elements in index order, and the sum is the lanes added in a fixed
// tree. The report prints the figures to the last digit: they are the same at any thread count and
// in every ISA, and eight additions run at once where one chain waited an addition's latency per
// element. With a float32 reference and run the terms are computed and added in one vectorized loop
// (metrics_kernel.hpp, bias_lanes); otherwise a chunk's terms first, in a loop the compiler
// vectorizes (selects, not branches: the sign of an error is a coin toss a branch predictor loses
// half the time), then their lanes. An element the estimate leaves out has the terms +0.0, which
// leave every sum as it is (a sum that starts at +0.0 is never -0.0). Chunks start at multiples of
// kChunk, so an element's lane is its place in its chunk mod 8.
constexpr int kChunk = 4096;
constexpr int kLanes = detail::kBiasLanes;

// A sum from its lanes.
inline double lanes_total(const double* l) { return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])); }
// p[k, end) added to `lanes`, p[q] into lane q mod 8 (p: a chunk's terms; a chunk starts in lane 0).
inline void add_run(double* __restrict lanes, const double* __restrict p, int k, int end) {
  for (; k < end && k % kLanes != 0; ++k) lanes[k % kLanes] += p[k];
  for (; k + kLanes <= end; k += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += p[k + l];
  for (; k < end; ++k) lanes[k % kLanes] += p[k];
}
inline void add_lanes(double* lanes, const double* p, int n) { add_run(lanes, p, 0, n); }

// The sums of rounding_bias, in lanes: sum e, sum |r| and, over independent elements, sum e^2,
// sum e |r|, sum r^2 (e = sign(r) (x - r)), so that sum (e - beta |r|)^2 = see - 2 beta ser +
// beta^2 srr needs no second pass; and the counts.
struct Sums {
  double sum[2 * kLanes] = {};  // e, then |r|
  double sq[3 * kLanes] = {};   // e^2, e |r|, r^2
  std::int64_t n = 0, toward = 0, away = 0;
};

// The terms of elements [0, n) of a chunk: e and |r| where counted, +0.0 elsewhere; counts into s.
// Two lanes at a time in GCC vector extensions (the baseline's SSE2), so that no element branches.
typedef double v2d __attribute__((vector_size(16)));
typedef std::int64_t v2l __attribute__((vector_size(16)));
typedef float v2f __attribute__((vector_size(8)));
template <class T>
inline v2d load2(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    v2f f;
    std::memcpy(&f, p, sizeof f);
    return __builtin_convertvector(f, v2d);
  } else {
    v2d d;
    std::memcpy(&d, p, sizeof d);
    return d;
  }
}
template <class T>
void terms(const T* rp, const T* xp, int n, double* e, double* a, Sums& s) {
  const v2l abs_mask = v2l{} + 0x7fffffffffffffffLL;
  const v2d inf = v2d{} + static_cast<double>(INFINITY), zero = v2d{};
  v2l cnt = v2l{}, toward = v2l{}, away = v2l{};
  int i = 0;
  for (; i + 2 <= n; i += 2) {
    const v2d r = load2(rp + i), x = load2(xp + i);
    const v2d ar = (v2d)((v2l)r & abs_mask), ax = (v2d)((v2l)x & abs_mask);
    const v2l ok = (r != zero) & (ar < inf) & (ax < inf);  // lanes: -1 counted, 0 not
    const v2d d = r > zero ? x - r : r - x;
    const v2d ei = ok ? d : zero, ai = ok ? ar : zero;
    std::memcpy(e + i, &ei, sizeof ei);
    std::memcpy(a + i, &ai, sizeof ai);
    cnt -= ok, toward -= ei < zero, away -= ei > zero;
  }
  std::int64_t c = cnt[0] + cnt[1], t = toward[0] + toward[1], w = away[0] + away[1];
  for (; i < n; ++i) {
    const double r = rp[i], x = xp[i], ar = std::fabs(r);
    const bool ok = (r != 0) & (ar < INFINITY) & (std::fabs(x) < INFINITY);
    const double ei = ok ? (r > 0 ? x - r : r - x) : 0.0;
    e[i] = ei, a[i] = ok ? ar : 0.0;
    c += ok, t += ei < 0, w += ei > 0;
  }
  s.n += c, s.toward += t, s.away += w;
}

// Elements [begin, begin + n) of v as doubles, the values array_element reads (float16 through the
// metric kernels' vectorized widening).
void read_chunk(const ArrayView& v, std::int64_t begin, int n, double* out, float* scratch) {
  switch (v.storage) {
    case DType::float64:
      std::memcpy(out, v.data + begin * 8, static_cast<std::size_t>(n) * 8);
      return;
    case DType::float16:
      detail::kernels().half_to_float(reinterpret_cast<const std::uint16_t*>(v.data) + begin, scratch, n);
      break;
    default:
      std::memcpy(scratch, v.data + begin * 4, static_cast<std::size_t>(n) * 4);
  }
  for (int j = 0; j < n; ++j) out[j] = scratch[j];
}

// The terms of elements [begin, begin + n) of ref and run (n <= kChunk) into e and a.
void chunk_terms(const ArrayView& ref, const ArrayView& run, std::int64_t begin, int n, double* e, double* a,
                 Sums& s) {
  if (ref.storage == DType::float32 && run.storage == DType::float32) {
    std::int64_t c[3] = {0, 0, 0};
    detail::kernels().bias_terms(reinterpret_cast<const float*>(ref.data) + begin,
                                 reinterpret_cast<const float*>(run.data) + begin, nullptr, n, 0, 0, e, a, nullptr,
                                 nullptr, c);
    s.n += c[0], s.toward += c[1], s.away += c[2];
    return;
  }
  thread_local std::vector<double> rb(kChunk), xb(kChunk);
  thread_local std::vector<float> scratch(kChunk);
  read_chunk(ref, begin, n, rb.data(), scratch.data());
  read_chunk(run, begin, n, xb.data(), scratch.data());
  terms(rb.data(), xb.data(), n, e, a, s);
}

// v where `keep`, +0.0 elsewhere (accumulation_bias).
inline double masked(double v, bool keep) {
  std::uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  b &= std::uint64_t(0) - keep;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

// accumulation_bias's two sums (t, then m), in lanes, when they are carried beside the estimate's.
struct AccSums {
  double lanes[2 * kLanes] = {};
};

// A chunk's terms: the estimate's (e, a) and, given a scale, accumulation_bias's (t, m) from the
// same reads of the reference (float32 reference and run: fused(); anything else takes the
// functions one at a time).
class Terms {
 public:
  Terms(const ArrayView& ref, const ArrayView& run) : ref_(ref), run_(run) {}
  Terms(const ArrayView& ref, const ArrayView& run, const ArrayView& scale, const BoundOptions& o)
      : ref_(ref), run_(run), scale_(&scale), per_(0x1p-24 * std::sqrt(o.n)), unit_(o.scale_unit),
        t(kChunk), m(kChunk), sf_(kChunk) {}
  static bool fused(const ArrayView& ref, const ArrayView& run, const ArrayView& scale) {
    return ref.storage == DType::float32 && run.storage == DType::float32 &&
           (scale.storage == DType::float32 || scale.storage == DType::float16) && ref.numel == run.numel &&
           ref.numel == scale.numel;
  }
  void chunk(std::int64_t begin, int n, Sums& s) {
    if (!scale_) return chunk_terms(ref_, run_, begin, n, e.data(), a.data(), s);
    const float* sp = reinterpret_cast<const float*>(scale_->data) + begin;
    if (scale_->storage == DType::float16) {
      detail::kernels().half_to_float(reinterpret_cast<const std::uint16_t*>(scale_->data) + begin, sf_.data(), n);
      sp = sf_.data();
    }
    std::int64_t c[3] = {0, 0, 0};
    detail::kernels().bias_terms(reinterpret_cast<const float*>(ref_.data) + begin,
                                 reinterpret_cast<const float*>(run_.data) + begin, sp, n, per_, unit_, e.data(),
                                 a.data(), t.data(), m.data(), c);
    s.n += c[0], s.toward += c[1], s.away += c[2];
  }
  std::vector<double> e = std::vector<double>(kChunk), a = std::vector<double>(kChunk);

  // Whether lanes() takes this tensor: float32 reference and run (and scale, if any, as fused()).
  bool fused_lanes() const {
    return ref_.storage == DType::float32 && run_.storage == DType::float32 && ref_.numel == run_.numel &&
           (!scale_ || fused(ref_, run_, *scale_));
  }
  // Elements [begin, begin + n) (n <= kChunk) added to the lanes of sum (e, |r|), sq and, given a
  // scale, acc (unless null), their terms never stored; the counts into s.
  void lanes(std::int64_t begin, int n, double* sum, double* sq, double* acc, Sums& s) {
    const float* sp = nullptr;
    if (scale_ && acc) {
      sp = reinterpret_cast<const float*>(scale_->data) + begin;
      if (scale_->storage == DType::float16) {
        detail::kernels().half_to_float(reinterpret_cast<const std::uint16_t*>(scale_->data) + begin, sf_.data(), n);
        sp = sf_.data();
      }
    }
    std::int64_t c[3] = {0, 0, 0};
    detail::kernels().bias_lanes(reinterpret_cast<const float*>(ref_.data) + begin,
                                 reinterpret_cast<const float*>(run_.data) + begin, sp, n,
                                 static_cast<int>(begin % kLanes), per_, unit_, sum, sq, sp ? acc : nullptr, c);
    s.n += c[0], s.toward += c[1], s.away += c[2];
  }

 private:
  ArrayView ref_, run_;
  const ArrayView* scale_ = nullptr;
  double per_ = 0, unit_ = 0;

 public:
  std::vector<double> t, m;

 private:
  std::vector<float> sf_;
};

// A chunk's stored terms added to the lanes of the estimate's five sums and, with Acc,
// accumulation_bias's two.
template <bool Acc>
void add_chunk(const double* e, const double* a, const double* t, const double* m, int n, Sums& s, AccSums& acc) {
  add_lanes(s.sum, e, n), add_lanes(s.sum + kLanes, a, n);
  // One product per element, stored before it is added (as the kernels' products are): no
  // contraction can fuse a product into its addition and change the sum's bits.
  thread_local std::vector<double> p(kChunk);
  for (int k = 0; k < n; ++k) p[static_cast<std::size_t>(k)] = e[k] * e[k];
  add_lanes(s.sq, p.data(), n);
  for (int k = 0; k < n; ++k) p[static_cast<std::size_t>(k)] = e[k] * a[k];
  add_lanes(s.sq + kLanes, p.data(), n);
  for (int k = 0; k < n; ++k) p[static_cast<std::size_t>(k)] = a[k] * a[k];
  add_lanes(s.sq + 2 * kLanes, p.data(), n);
  if constexpr (Acc) add_lanes(acc.lanes, t, n), add_lanes(acc.lanes + kLanes, m, n);
}

// The estimate's sums over independent elements; with Acc, accumulation_bias's two beside them.
template <bool Acc>
void independent_sums(Terms& tm, std::int64_t numel, Sums& s, AccSums& acc) {
  if (tm.fused_lanes()) {
    for (std::int64_t i = 0; i < numel; i += kChunk)
      tm.lanes(i, static_cast<int>(std::min<std::int64_t>(kChunk, numel - i)), s.sum, s.sq, Acc ? acc.lanes : nullptr, s);
    return;
  }
  for (std::int64_t i = 0; i < numel; i += kChunk) {
    const int n = static_cast<int>(std::min<std::int64_t>(kChunk, numel - i));
    tm.chunk(i, n, s);
    add_chunk<Acc>(tm.e.data(), tm.a.data(), tm.t.data(), tm.m.data(), n, s, acc);
  }
}

RoundingBias independent_estimate(const Sums& s, double allowed) {
  RoundingBias b;
  b.elements = s.n, b.toward_zero = s.toward, b.away_from_zero = s.away;
  const double se = lanes_total(s.sum), sr = lanes_total(s.sum + kLanes);
  if (s.n < 2 || sr <= 0) return b;
  b.relative = se / sr;
  const double see = lanes_total(s.sq), ser = lanes_total(s.sq + kLanes), srr = lanes_total(s.sq + 2 * kLanes);
  const double spread = std::max(0.0, see - 2 * b.relative * ser + b.relative * b.relative * srr);
  b.se = std::sqrt(spread) / sr;
  const double excess = std::fabs(b.relative) - allowed;
  if (excess > 0) b.z = b.se > 0 ? excess / b.se : INFINITY;
  return b;
}

}  // namespace

RoundingBias rounding_bias(const ArrayView& ref, const ArrayView& run, double allowed) {
  if (ref.numel != run.numel) return RoundingBias{};
  Sums s;
  AccSums unused;
  Terms tm(ref, run);
  independent_sums<false>(tm, ref.numel, s, unused);
  return independent_estimate(s, allowed);
}

namespace {

// The continued fraction of the regularized incomplete beta function (Numerical Recipes, betacf;
// modified Lentz).
double beta_fraction(double a, double b, double x) {
  const double tiny = 1e-300;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  d = 1 / (std::fabs(d) < tiny ? tiny : d);
  double h = d;
  for (int m = 1; m <= 1000; ++m) {
    const double m2 = 2.0 * m;
    for (const double aa : {m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))}) {
      d = 1 + aa * d;
      d = 1 / (std::fabs(d) < tiny ? tiny : d);
      c = 1 + aa / c;
      if (std::fabs(c) < tiny) c = tiny;
      h *= d * c;
    }
    if (std::fabs(d * c - 1) < 1e-15) break;
  }
  return h;
}

// I_x(a, b).
double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) +
                                b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * beta_fraction(a, b, x) / a;
  return 1 - front * beta_fraction(b, a, 1 - x) / b;
}

// P(|T| > t) for a Student t of `dof` degrees of freedom.
double student_two_sided(double t, double dof) { return incomplete_beta(dof / 2, 0.5, dof / (dof + t * t)); }

}  // namespace

double rounding_bias_threshold(double dof) {
  const double p = std::erfc(kRoundingBiasZ / std::sqrt(2.0));
  if (!(dof > 0)) return INFINITY;
  double lo = kRoundingBiasZ, hi = 1e12;  // the t quantile is above the normal's, below 1e12 for dof >= 1
  for (int i = 0; i < 200 && hi / lo > 1 + 1e-9; ++i) {
    const double mid = std::sqrt(lo * hi);
    (student_two_sided(mid, dof) > p ? lo : hi) = mid;
  }
  return hi;
}

std::optional<BiasBlocks> gradient_blocks(const std::string& tensor, const std::string& axes, std::int64_t kernel_h,
                                          std::int64_t dilation_h) {
  auto axis = [&](char c) { return static_cast<int>(axes.find(c)); };
  auto one = [&](char c) -> std::optional<BiasBlocks> {
    if (axes.find(c) == std::string::npos) return std::nullopt;
    return BiasBlocks{{axis(c)}, 0};
  };
  if (tensor == "grad_A") return one('M');
  if (tensor == "grad_B") return one('N');
  if (tensor == "grad_weight") return one('O');
  if (tensor == "grad_bias" && axes.size() == 1) return BiasBlocks{{0}, 0};
  if (tensor == "grad_input") {
    if (axes.find('N') == std::string::npos) return std::nullopt;
    if (kernel_h < 1 || axes.find('H') == std::string::npos) return one('N');
    return BiasBlocks{{axis('N'), axis('H')}, (kernel_h - 1) * std::max<std::int64_t>(dilation_h, 1)};
  }
  return std::nullopt;
}

namespace {

// Per block: sum e (e = sign(r) (x - r)) and sum |r|, over the elements rounding_bias weighs.
struct BlockSums {
  std::vector<double> e, r;
  std::int64_t n = 0, toward = 0, away = 0;
};

// With Acc, accumulation_bias's two sums are carried in the same loops.
template <bool Acc>
BlockSums block_sums(Terms& tm, std::int64_t numel, const Shape& shape, const BiasBlocks& bl, AccSums& acc) {
  BlockSums s;
  // The block of an element: sum over the block axes of its index times the axis's weight.
  const std::size_t rank = shape.size();
  std::vector<std::int64_t> w(rank, 0);
  std::int64_t count = 1;
  for (std::size_t k = bl.axes.size(); k-- > 0;) {
    const auto a = static_cast<std::size_t>(bl.axes[k]);
    w[a] = count, count *= shape[a];
  }
  s.e.assign(static_cast<std::size_t>(count), 0), s.r.assign(static_cast<std::size_t>(count), 0);
  if (numel == 0) return s;
  // The elements as [outer][j][inner]: j the last block axis, inner every axis after it (a run of
  // consecutive elements in one block), outer every axis before it (an odometer over those gives
  // the block of j = 0). Each block's two sums are lanes of their own (`lanes`: a block's e lanes,
  // then its |r| lanes), taken a run at a time: runs of a few hundred elements and more take their
  // terms and sums in one loop (Terms::lanes, its squares unused), shorter ones (a run may be one
  // element long, where a call per run costs more than it saves) add a chunk's stored terms. The
  // counts do not depend on the order.
  std::vector<double> lanes(2 * kLanes * static_cast<std::size_t>(count), 0);
  std::size_t last = 0;
  for (int a : bl.axes) last = std::max(last, static_cast<std::size_t>(a));
  std::int64_t inner = 1;
  for (std::size_t a = last + 1; a < rank; ++a) inner *= shape[a];
  const std::int64_t J = shape[last], wj = w[last];
  std::vector<std::int64_t> idx(last, 0);
  std::int64_t b0 = 0, j = 0, left = inner;  // the block base of the current outer index, j, elements left in its run
  auto block = [&] { return &lanes[2 * kLanes * static_cast<std::size_t>(b0 + j * wj)]; };
  const bool fused = tm.fused_lanes() && inner >= 256;
  Sums counts;
  double squares[3 * kLanes] = {};  // Terms::lanes' squares, which blocks do not use
  // The run is over: the next run's block is taken up.
  auto next_run = [&] {
    left = inner;
    if (++j < J) return;
    j = 0;
    for (std::size_t ax = last; ax-- > 0;) {
      if (++idx[ax] < shape[ax]) {
        b0 += w[ax];
        return;
      }
      b0 -= w[ax] * (shape[ax] - 1), idx[ax] = 0;
    }
  };
  for (std::int64_t i = 0; i < numel; i += kChunk) {
    const int n = static_cast<int>(std::min<std::int64_t>(kChunk, numel - i));
    if (!fused) {
      tm.chunk(i, n, counts);
      if constexpr (Acc) add_lanes(acc.lanes, tm.t.data(), n), add_lanes(acc.lanes + kLanes, tm.m.data(), n);
    }
    const double *e = tm.e.data(), *a = tm.a.data();
    if (inner == 1) {  // every element a run of its own (grad_B by column)
      for (int k = 0; k < n; ++k) {
        double* bl_lanes = block();
        bl_lanes[k % kLanes] += e[k], bl_lanes[kLanes + k % kLanes] += a[k];
        next_run();
      }
      continue;
    }
    for (int k = 0; k < n;) {
      // The rest of the current run, or of the chunk: one block's elements.
      const int m = static_cast<int>(std::min<std::int64_t>(left, n - k));
      double* bl_lanes = block();
      if (fused) tm.lanes(i + k, m, bl_lanes, squares, Acc ? acc.lanes : nullptr, counts);
      else add_run(bl_lanes, e, k, k + m), add_run(bl_lanes + kLanes, a, k, k + m);
      k += m, left -= m;
      if (left == 0) next_run();
    }
  }
  for (std::size_t b = 0; b < s.e.size(); ++b)
    s.e[b] = lanes_total(&lanes[2 * kLanes * b]), s.r[b] = lanes_total(&lanes[2 * kLanes * b + kLanes]);
  s.n = counts.n, s.toward = counts.toward, s.away = counts.away;
  return s;
}

}  // namespace

namespace {

// Whether the blocked estimate has anything to sum (else it is the empty estimate).
bool blocks_fit(const ArrayView& ref, const ArrayView& run, const Shape& shape, const BiasBlocks& bl) {
  if (ref.numel != run.numel || ref.numel != shape_numel(shape) || bl.axes.empty()) return false;
  for (int a : bl.axes)
    if (a < 0 || static_cast<std::size_t>(a) >= shape.size()) return false;
  return true;
}

RoundingBias blocked_estimate(const BlockSums& s, const Shape& shape, const BiasBlocks& bl, double allowed) {
  RoundingBias b;
  b.elements = s.n, b.toward_zero = s.toward, b.away_from_zero = s.away;
  double se = 0, sr = 0;
  for (std::size_t k = 0; k < s.e.size(); ++k) se += s.e[k], sr += s.r[k], b.blocks += s.r[k] > 0;
  if (s.n < 2 || sr <= 0) return b;
  b.relative = se / sr;
  std::vector<double> d(s.e.size());
  for (std::size_t k = 0; k < d.size(); ++k) d[k] = s.e[k] - b.relative * s.r[k];
  // Blocks up to `lag` apart along the last block axis (within the same indices of the others).
  const auto last = static_cast<std::int64_t>(shape[static_cast<std::size_t>(bl.axes.back())]);
  double v0 = 0, cov = 0;
  for (std::size_t k = 0; k < d.size(); ++k) {
    v0 += d[k] * d[k];
    const auto pos = static_cast<std::int64_t>(k) % last;
    for (std::int64_t l = 1; l <= bl.lag && pos + l < last; ++l) cov += d[k] * d[k + static_cast<std::size_t>(l)];
  }
  const double groups = std::floor(static_cast<double>(b.blocks) / static_cast<double>(bl.lag + 1));
  b.dof = groups - 1;
  b.threshold = rounding_bias_threshold(b.dof);
  if (groups < 3) return b;  // too few independent groups to estimate the noise from
  b.se = std::sqrt(std::max(v0, v0 + 2 * cov) * groups / (groups - 1)) / sr;
  const double excess = std::fabs(b.relative) - allowed;
  if (excess > 0) b.z = b.se > 0 ? excess / b.se : INFINITY;
  return b;
}

}  // namespace

RoundingBias rounding_bias(const ArrayView& ref, const ArrayView& run, const Shape& shape, const BiasBlocks& bl,
                           double allowed) {
  if (!blocks_fit(ref, run, shape, bl)) return RoundingBias{};
  Terms tm(ref, run);
  AccSums unused;
  return blocked_estimate(block_sums<false>(tm, ref.numel, shape, bl, unused), shape, bl, allowed);
}

BiasAndAccumulation rounding_bias_and_accumulation(const ArrayView& ref, const ArrayView& run, const ArrayView& scale,
                                                   const BoundOptions& o, const Shape& shape,
                                                   const BiasBlocks* blocks, double allowed) {
  const bool fit = !blocks || blocks_fit(ref, run, shape, *blocks);
  if (!fit || !Terms::fused(ref, run, scale))
    return {blocks ? rounding_bias(ref, run, shape, *blocks, allowed) : rounding_bias(ref, run, allowed),
            accumulation_bias(ref, scale, o)};
  Terms tm(ref, run, scale, o);
  AccSums acc;
  BiasAndAccumulation out;
  if (blocks) {
    out.bias = blocked_estimate(block_sums<true>(tm, ref.numel, shape, *blocks, acc), shape, *blocks, allowed);
  } else {
    Sums s;
    independent_sums<true>(tm, ref.numel, s, acc);
    out.bias = independent_estimate(s, allowed);
  }
  const double mass = lanes_total(acc.lanes + kLanes);
  out.accumulated = mass > 0 ? lanes_total(acc.lanes) / mass : 0;
  return out;
}

RoundingBias with_allowance(RoundingBias b, double allowed) {
  b.z = 0;
  // Too few independent groups of blocks: the estimate stopped before its z (rounding_bias).
  if (b.blocks > 0 && b.dof < 2) return b;
  // Where it stopped for want of elements, relative is 0 and so is z, as it was.
  const double excess = std::fabs(b.relative) - allowed;
  if (excess > 0) b.z = b.se > 0 ? excess / b.se : INFINITY;
  return b;
}

double accumulation_bias(const ArrayView& ref, const ArrayView& scale, const BoundOptions& o) {
  if (ref.numel != scale.numel) return 0;
  const double per = 0x1p-24 * std::sqrt(o.n), unit = o.scale_unit;
  double acc[kLanes] = {}, mass[kLanes] = {};
  // Sums in lanes, as rounding_bias's: a chunk's terms first (vectorized, masks for the elements
  // left out, which add +0.0), then their lanes.
  thread_local std::vector<double> rb(kChunk), sb(kChunk), tb(kChunk), ab(kChunk);
  thread_local std::vector<float> scratch(kChunk), sf(kChunk);
  const v2l abs_mask = v2l{} + 0x7fffffffffffffffLL;
  const v2d inf = v2d{} + static_cast<double>(INFINITY), zero = v2d{}, per2 = v2d{} + per, unit2 = v2d{} + unit;
  auto terms = [&](const auto* rp, const auto* sp, int n) {
    int i = 0;
    for (; i + 2 <= n; i += 2) {
      const v2d r = load2(rp + i), rho = load2(sp + i) * unit2;
      const v2d ar = (v2d)((v2l)r & abs_mask), arho = (v2d)((v2l)rho & abs_mask);
      const v2l ok = (r != zero) & (ar < inf);
      const v2d t = per2 * (ar + (arho < inf ? rho : zero));
      const v2d tm = ok ? t : zero, am = ok ? ar : zero;
      std::memcpy(&tb[static_cast<std::size_t>(i)], &tm, sizeof tm);
      std::memcpy(&ab[static_cast<std::size_t>(i)], &am, sizeof am);
    }
    for (; i < n; ++i) {
      const double r = rp[i], ar = std::fabs(r), rho = sp[i] * unit;
      const bool ok = (r != 0) & (ar < INFINITY);
      const double t = per * (ar + masked(rho, std::fabs(rho) < INFINITY));
      tb[static_cast<std::size_t>(i)] = masked(t, ok), ab[static_cast<std::size_t>(i)] = masked(ar, ok);
    }
    add_lanes(acc, tb.data(), n), add_lanes(mass, ab.data(), n);
  };
  for (std::int64_t i = 0; i < ref.numel; i += kChunk) {
    const int n = static_cast<int>(std::min<std::int64_t>(kChunk, ref.numel - i));
    if (ref.storage == DType::float32 && scale.storage == DType::float16) {  // the common case
      detail::kernels().half_to_float(reinterpret_cast<const std::uint16_t*>(scale.data) + i, sf.data(), n);
      terms(reinterpret_cast<const float*>(ref.data) + i, sf.data(), n);
      continue;
    }
    read_chunk(ref, i, n, rb.data(), scratch.data());
    read_chunk(scale, i, n, sb.data(), scratch.data());
    terms(rb.data(), sb.data(), n);
  }
  const double m = lanes_total(mass);
  return m > 0 ? lanes_total(acc) / m : 0;
}

}  // namespace validate::compare
