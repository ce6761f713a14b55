// The rounding-bias estimate of a tensor (rounding_bias.hpp).
#include "validate/metrics/rounding_bias.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace validate::compare {

namespace {

// Elements [begin, begin + n) of v as doubles, the values array_element reads: the passes below
// read a chunk at a time (float16 through the vectorized widening) instead of an element at a time
// through a switch on the storage, which was most of compare's time on large gradients.
constexpr int kChunk = 4096;
void read_chunk(const ArrayView& v, std::int64_t begin, int n, double* out, float* scratch) {
  switch (v.storage) {
    case DType::float64:
      std::memcpy(out, v.data + begin * 8, static_cast<std::size_t>(n) * 8);
      return;
    case DType::float16:
      float16_to_float(reinterpret_cast<const std::uint16_t*>(v.data) + begin, scratch, static_cast<std::size_t>(n));
      break;
    default:
      std::memcpy(scratch, v.data + begin * 4, static_cast<std::size_t>(n) * 4);
  }
  for (int j = 0; j < n; ++j) out[j] = scratch[j];
}

// f(a_i, b_i) for i = 0, 1, ... in order (a and b of the same numel): read in place when both are
// float32, the common case, and a chunk at a time otherwise.
template <class F>
void for_each_pair(const ArrayView& a, const ArrayView& b, F&& f) {
  if (a.storage == DType::float32 && b.storage == DType::float32) {
    const auto* af = reinterpret_cast<const float*>(a.data);
    const auto* bf = reinterpret_cast<const float*>(b.data);
    for (std::int64_t i = 0; i < a.numel; ++i) f(af[i], bf[i]);
    return;
  }
  std::vector<double> ab(kChunk), bb(kChunk);
  std::vector<float> scratch(kChunk);
  for (std::int64_t i = 0; i < a.numel; i += kChunk) {
    const int n = static_cast<int>(std::min<std::int64_t>(kChunk, a.numel - i));
    read_chunk(a, i, n, ab.data(), scratch.data());
    read_chunk(b, i, n, bb.data(), scratch.data());
    for (int j = 0; j < n; ++j) f(ab[static_cast<std::size_t>(j)], bb[static_cast<std::size_t>(j)]);
  }
}

// The sums one pass gathers: sum e, sum |r|, sum e^2, sum e |r|, sum r^2 (e = sign(r) (x - r)), so
// that sum (e - beta |r|)^2 = see - 2 beta ser + beta^2 srr needs no second pass.
struct Sums {
  double se = 0, sr = 0, see = 0, ser = 0, srr = 0;
  std::int64_t n = 0, toward = 0, away = 0;
  void add(double r, double x) {
    if (!(r != 0) || !std::isfinite(r) || !std::isfinite(x)) return;
    const double e = r > 0 ? x - r : r - x, a = std::fabs(r);
    se += e, sr += a, see += e * e, ser += e * a, srr += a * a;
    ++n;
    toward += e < 0;
    away += e > 0;
  }
};

}  // namespace

RoundingBias rounding_bias(const ArrayView& ref, const ArrayView& run, double allowed) {
  RoundingBias b;
  if (ref.numel != run.numel) return b;
  Sums s;
  for_each_pair(ref, run, [&](double r, double x) { s.add(r, x); });
  b.elements = s.n, b.toward_zero = s.toward, b.away_from_zero = s.away;
  if (s.n < 2 || s.sr <= 0) return b;
  b.relative = s.se / s.sr;
  const double spread = std::max(0.0, s.see - 2 * b.relative * s.ser + b.relative * b.relative * s.srr);
  b.se = std::sqrt(spread) / s.sr;
  const double excess = std::fabs(b.relative) - allowed;
  if (excess > 0) b.z = b.se > 0 ? excess / b.se : INFINITY;
  return b;
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

// Elements [i0, i0 + run) all lie in block b: `run` is the stride of the block axis with the
// smallest stride, so the block index is computed once per run, not per element.
template <class Read>
void add_run(BlockSums& s, std::size_t b, std::int64_t i0, std::int64_t run, Read read) {
  double se = 0, sr = 0;
  for (std::int64_t i = i0; i < i0 + run; ++i) {
    const auto [r, x] = read(i);
    if (!(r != 0) || !std::isfinite(r) || !std::isfinite(x)) continue;
    const double e = r > 0 ? x - r : r - x;
    se += e, sr += std::fabs(r);
    ++s.n, s.toward += e < 0, s.away += e > 0;
  }
  s.e[b] += se, s.r[b] += sr;
}

BlockSums block_sums(const ArrayView& ref, const ArrayView& run, const Shape& shape, const BiasBlocks& bl) {
  BlockSums s;
  // The block of an element: sum over the block axes of its index times the axis's weight, kept up
  // to date with an odometer over the shape (no division per element).
  const std::size_t rank = shape.size();
  std::vector<std::int64_t> w(rank, 0), idx(rank, 0);
  std::int64_t count = 1;
  for (std::size_t k = bl.axes.size(); k-- > 0;) {
    const auto a = static_cast<std::size_t>(bl.axes[k]);
    w[a] = count, count *= shape[a];
  }
  s.e.assign(static_cast<std::size_t>(count), 0), s.r.assign(static_cast<std::size_t>(count), 0);
  if (ref.numel == 0) return s;
  // The current block's two sums are held in registers while consecutive elements stay in it (the
  // same additions in the same order as adding to memory, without a store and load per element).
  std::int64_t b = 0, held = 0;
  double he = 0, hr = 0;
  for_each_pair(ref, run, [&](double r, double x) {
    if (b != held) {
      s.e[static_cast<std::size_t>(held)] = he, s.r[static_cast<std::size_t>(held)] = hr;
      held = b, he = s.e[static_cast<std::size_t>(b)], hr = s.r[static_cast<std::size_t>(b)];
    }
    if (r != 0 && std::isfinite(r) && std::isfinite(x)) {
      const double e = r > 0 ? x - r : r - x;
      he += e, hr += std::fabs(r);
      ++s.n, s.toward += e < 0, s.away += e > 0;
    }
    for (std::size_t a = rank; a-- > 0;) {
      if (++idx[a] < shape[a]) {
        b += w[a];
        break;
      }
      b -= w[a] * (shape[a] - 1), idx[a] = 0;
    }
  });
  s.e[static_cast<std::size_t>(held)] = he, s.r[static_cast<std::size_t>(held)] = hr;
  return s;
}

}  // namespace

RoundingBias rounding_bias(const ArrayView& ref, const ArrayView& run, const Shape& shape, const BiasBlocks& bl,
                           double allowed) {
  RoundingBias b;
  if (ref.numel != run.numel || ref.numel != shape_numel(shape) || bl.axes.empty()) return b;
  for (int a : bl.axes)
    if (a < 0 || static_cast<std::size_t>(a) >= shape.size()) return b;
  const BlockSums s = block_sums(ref, run, shape, bl);
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

double accumulation_bias(const ArrayView& ref, const ArrayView& scale, const BoundOptions& o) {
  if (ref.numel != scale.numel) return 0;
  const double per = 0x1p-24 * std::sqrt(o.n);
  double acc = 0, mass = 0;
  for_each_pair(ref, scale, [&](double r, double sc) {
    if (!(r != 0) || !std::isfinite(r)) return;
    double rho = sc * o.scale_unit;
    if (!std::isfinite(rho)) rho = 0;
    acc += per * (std::fabs(r) + rho);
    mass += std::fabs(r);
  });
  return mass > 0 ? acc / mass : 0;
}

}  // namespace validate::compare
