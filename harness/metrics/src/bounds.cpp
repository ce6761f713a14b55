// Per-element error bounds (bounds.hpp; the derivation is in docs/compare.md, "Error bounds").
#include "validate/metrics/bounds.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <atomic>
#include <limits>
#include <thread>
#include <vector>

#include "metrics_kernel.hpp"
#include "validate/metrics/ulp.hpp"

namespace validate::compare {

namespace {

constexpr double kU = 0x1p-24;  // float32 unit roundoff: the accumulator every stack may use
constexpr double kSqrt2 = 1.4142135623730951;
// The lambda generate computes a gradient's stored choice term at (torch_reference.cpp).
constexpr double kChoiceLambda = 8;

}  // namespace

double unit_roundoff(DType d) {
  switch (d) {
    case DType::bfloat16: return 0x1p-8;
    case DType::float16: return 0x1p-11;
    case DType::float64: return 0x1p-53;
    case DType::float32: break;
  }
  return kU;
}

double array_element(const ArrayView& v, std::int64_t i) {
  const std::byte* p = v.data + i * static_cast<std::int64_t>(dtype_size(v.storage));
  switch (v.storage) {
    case DType::float64: {
      double d;
      std::memcpy(&d, p, sizeof d);
      return d;
    }
    case DType::float16: {
      std::uint16_t h;
      std::memcpy(&h, p, sizeof h);
      return float16_bits_to_float(h);
    }
    default: {
      float f;
      std::memcpy(&f, p, sizeof f);
      return f;
    }
  }
}

double dtype_ulp(double v, DType d) {
  int p = 24, emin = -126;  // precision in bits, smallest normal exponent
  if (d == DType::bfloat16) p = 8;
  else if (d == DType::float16) p = 11, emin = -14;
  else if (d == DType::float64) p = 53, emin = -1022;
  const double a = std::fabs(v);
  int e = emin;
  if (a > 0 && std::isfinite(a)) e = std::max(std::ilogb(a), emin);
  return std::ldexp(1.0, e - p + 1);
}

// The stored result's rounding, u_d |y| (the standard model), and below the normal range half the
// case dtype's subnormal spacing; plus n half float32 subnormal spacings for the partial results.
double rounding_floor(DType d, double n) {
  const double half_sub = d == DType::bfloat16 ? 0x1p-134 : d == DType::float16 ? 0x1p-25 : 0x1p-150;
  return half_sub + n * 0x1p-150;
}

double stored_roundings(double ref, double run, double reach, const BoundOptions& o) {
  const double hr = 0.5 * dtype_ulp(ref, o.dtype);
  const double hx = std::min(0.5 * dtype_ulp(run, o.dtype), 0.5 * dtype_ulp(std::fabs(ref) + hr + reach, o.dtype));
  return (hr + hx) + 2 * o.n * 0x1p-150;
}

// The roundings of the stored result that no lambda scales, as per_abs_y |y| + constant: u_d |y|
// (the result), with a bias added after the sum u_d (|y| + max |bias|) more (the sum stored before
// the addition; not with the stored bias-after term, which holds that route instead), and the
// underflow floor eta.
// `blanket`: with the noise model's term for the bias added after even where a stored term holds
// that route (the bound that term is capped at).
struct StoredRounding {
  double per_abs_y, constant;
  explicit StoredRounding(const BoundOptions& o, bool blanket = false)
      : per_abs_y(unit_roundoff(o.dtype)), constant(rounding_floor(o.dtype, o.n)) {
    if (o.added_after > 0 && (!o.after || blanket)) constant += per_abs_y * o.added_after, per_abs_y *= 2;
  }
};

double stored_rounding(double ya, const BoundOptions& o) {
  const StoredRounding s(o);
  return s.per_abs_y * ya + s.constant;
}

// u_p: the relative error of one product term (bounds.hpp).
double product_unit(const BoundOptions& o) {
  const double base = o.gradient ? unit_roundoff(o.dtype) : kU;
  if (o.operand_u <= 0) return base;
  const double op = 2 * o.operand_u + o.operand_u * o.operand_u;  // both operands rounded
  return base + (o.gradient ? 2 * op : op);
}

SideParts side_parts(double y, double rho, const BoundOptions& o) {
  if (o.per_lambda) return {rho, 0};
  const double up = product_unit(o);
  const double accumulated = o.split_gradient ? 0 : rho;  // a split scale carries it in S
  return {kU * std::sqrt(o.n) * (std::fabs(y) + accumulated) + up * rho, stored_rounding(std::fabs(y), o)};
}

double side_bound(double y, double rho, const BoundOptions& o) {
  const SideParts p = side_parts(y, rho, o);
  return o.lambda * p.statistical + p.deterministic;
}

double two_stack_bound(double y, double rho, const BoundOptions& o) {
  const SideParts p = side_parts(y, rho, o);
  return (o.per_lambda ? 2 : kSqrt2) * o.lambda * p.statistical + 2 * p.deterministic;
}

Result<LossBound> loss_bound(const ArrayView& y, const ArrayView& scale, const ArrayView& target,
                             const BoundOptions& o, double loss) {
  if (y.numel != scale.numel || y.numel != target.numel || y.numel == 0)
    return Error{"loss bound: the output, its scale and the target differ in element count"};
  const double n = static_cast<double>(y.numel);
  double lin2 = 0, quad = 0, alg2 = 0;
  for (std::int64_t i = 0; i < y.numel; ++i) {
    const double yv = array_element(y, i), tv = array_element(target, i);
    double rho = array_element(scale, i) * o.scale_unit;
    if (!std::isfinite(yv) || !std::isfinite(tv)) return Error{"loss bound: a non-finite output or target"};
    if (!std::isfinite(rho)) rho = 0;
    const SideParts p = side_parts(yv, rho, o);
    const double c = 2 * (yv - tv) / n, side = o.lambda * p.statistical + p.deterministic;
    const double e = o.run_extra ? o.run_extra[i] : 0.0;  // the run's algorithm, its side only
    lin2 += c * c * (p.statistical * p.statistical + p.deterministic * p.deterministic);
    alg2 += c * c * e * e;
    quad += (2 * side + e) * (2 * side + e);
  }
  LossBound b;
  b.linear = o.lambda * std::sqrt(2 * lin2);
  b.quadratic = quad / n;
  const double l = std::fabs(loss);
  b.evaluation = 2 * (o.lambda * kU * std::sqrt(n) * l + 2 * kU * l);
  b.algorithm = std::sqrt(alg2);  // first order: its second-order part is in `quadratic`
  b.bound = b.linear + b.quadratic + b.evaluation + b.algorithm;
  return b;
}

double loss_algorithm_term(const ArrayView& y, const ArrayView& target, const double* extra) {
  if (!extra || y.numel == 0 || y.numel != target.numel) return 0;
  const double n = static_cast<double>(y.numel);
  double lin2 = 0, sq = 0;
  for (std::int64_t i = 0; i < y.numel; ++i) {
    const double c = 2 * (array_element(y, i) - array_element(target, i)) / n;
    lin2 += c * c * extra[i] * extra[i];
    sq += extra[i] * extra[i];
  }
  return std::sqrt(lin2) + sq / n;
}

double pcc_rounding_floor(const ArrayView& y, DType dtype) {
  const double ud = unit_roundoff(dtype), eta = rounding_floor(dtype, 0);
  double n = 0, mean = 0, m2 = 0, r2 = 0;  // Welford: the spread of a large common offset
  for (std::int64_t i = 0; i < y.numel; ++i) {
    const double v = array_element(y, i);
    if (!std::isfinite(v)) continue;
    n += 1;
    const double d = v - mean;
    mean += d / n;
    m2 += d * (v - mean);
    const double r = 2 * (ud * std::fabs(v) + eta);
    r2 += r * r;
  }
  if (!(m2 > r2)) return 0;
  return std::sqrt(1 - r2 / m2);
}

Result<double> loss_floor(const ArrayView& y, const ArrayView& target, DType dtype, double loss) {
  if (y.numel != target.numel || y.numel == 0)
    return Error{"loss floor: the output and the target differ in element count"};
  const double n = static_cast<double>(y.numel);
  double carried = 0;  // sum |dL/dy_i| |y_i|
  for (std::int64_t i = 0; i < y.numel; ++i) {
    const double yv = array_element(y, i), tv = array_element(target, i);
    if (!std::isfinite(yv) || !std::isfinite(tv)) return Error{"loss floor: a non-finite output or target"};
    carried += std::fabs(2 * (yv - tv) / n) * std::fabs(yv);
  }
  const double l = std::fabs(loss);
  return dtype_ulp(l, DType::float32) + kU * l + unit_roundoff(dtype) * carried;
}

namespace {

// sum |a_i b_i| of the summed products, per unit of the stored scale: sqrt(n) rho (Cauchy-Schwarz).
// A split gradient scale S = sqrt(n (u/u_d)^2 rho_a^2 + rho_p^2) holds the products' rho_a twice
// over: rho_a <= S (u_d/u) / sqrt(n), and rho_a <= (1 + u_d) rho_p <= (1 + u_d) S (its dL/dy
// factor is at most (1 + u_d) rho_p's); sqrt(n) S alone counted sqrt(n) once too often in float32,
// which made an 8-bit dL/dy "within the worst case of rounding".
double summed_magnitude_per_scale(const BoundOptions& o) {
  const double rn = std::sqrt(o.n);
  if (!o.split_gradient) return rn;
  const double ud = unit_roundoff(o.dtype);
  return std::min(rn * (1 + ud), ud / kU);
}

}  // namespace

double worst_case_bound(double y, double rho, const BoundOptions& o) {
  if (o.per_lambda) return o.lambda * rho;  // a checkpoint's bound has no worst-case counterpart
  const double up = product_unit(o);
  const double nu = o.n * kU;
  const double gamma = nu < 1 ? nu / (1 - nu) : std::numeric_limits<double>::infinity();
  // The products' rounding: u_p sum |a_i b_i| <= u_p sqrt(n) rho (a split scale's rho_p <= S).
  const double s = std::sqrt(o.n) * rho;
  return gamma * (std::fabs(y) + summed_magnitude_per_scale(o) * rho) + up * s + stored_rounding(std::fabs(y), o);
}

namespace {

// The constants of one side's bound a |y| + c rho + ud |y| + eta (c = lambda (u sqrt(n) + u_p),
// or lambda u_p for a split gradient scale) and of its worst case gamma (|y| + ra rho) + up rn rho
// + ud |y| + eta (ra: summed_magnitude_per_scale). Per unit lambda (a checkpoint's scale): c rho
// alone, c = lambda, and the worst case the same.
struct BoundConstants {
  double ud, up, rn, ra, a, c, eta, gamma;
  // The stored rounding with the bias-after route's noise-model term (StoredRounding's blanket).
  double ud_b = 0, eta_b = 0;
  // Two stacks: the statistical parts' factor, sqrt(2) (root-sum-square); 2 for a checkpoint's
  // scale, a two-stack bound already (2 lambda scale).
  double two = kSqrt2;
  explicit BoundConstants(const BoundOptions& o) {
    if (o.per_lambda) {
      ud = 0, rn = 1, ra = 1, a = 0, c = o.lambda, eta = 0, gamma = 0, up = o.lambda, two = 2;
      return;
    }
    const StoredRounding s(o), b(o, true);
    ud = s.per_abs_y, eta = s.constant, up = product_unit(o), rn = std::sqrt(o.n), ra = summed_magnitude_per_scale(o);
    ud_b = b.per_abs_y, eta_b = b.constant;
    a = o.lambda * kU * rn, c = o.lambda * up + (o.split_gradient ? 0 : a);
    const double nu = o.n * kU;
    gamma = nu < 1 ? nu / (1 - nu) : std::numeric_limits<double>::infinity();
  }
};

// The two-stack bound of a gradient with a stored dL/dy choice term Z (BoundOptions::choice) at
// element i: Z max(1, lambda / 8) + sqrt(2) lambda u sqrt(n) |g| (acc_y) + both sides' stored
// roundings (stored_roundings) + the run's algorithm term. Infinite where Z is not a value >= 0, so
// the noise-model bound stands: a stored term never loosens it.
// What one stored unit of Z stands for in that bound: choice_unit max(1, lambda / 8).
double choice_factor(const BoundOptions& o) {
  return o.choice_unit * std::max(1.0, o.lambda / kChoiceLambda);
}

double choice_bound(const ArrayView& choice, std::int64_t i, const BoundOptions& o, double acc_y, double ref,
                    double run, double extra) {
  const double z = array_element(choice, i);
  if (!(z >= 0) || !std::isfinite(z)) return std::numeric_limits<double>::infinity();
  const double reach = z * choice_factor(o) + kSqrt2 * acc_y + extra;
  return reach + stored_roundings(ref, run, reach, o);
}

}  // namespace

double after_term(const BoundOptions& o, std::int64_t i) {
  if (!o.after) return 0;
  const double w = array_element(*o.after, i) * o.after_unit;
  return w >= 0 && std::isfinite(w) ? w : 0.0;
}

BoundOptions without_after(BoundOptions o) {
  o.after = nullptr;
  return o;
}

double two_stack_bound_at(double y, double rho, const BoundOptions& o, std::int64_t i, double run) {
  const double noise = two_stack_bound(y, rho, o);
  if (o.after && !o.per_lambda)
    return std::max(noise, std::min(after_term(o, i), two_stack_bound(y, rho, without_after(o))));
  if (!o.choice || o.per_lambda) return noise;
  const SideParts p = side_parts(y, rho, o), at_zero = side_parts(0, rho, o);
  const double acc_y = o.lambda * (p.statistical - at_zero.statistical);  // lambda u sqrt(n) |y|
  return std::min(noise, choice_bound(*o.choice, i, o, acc_y, y, run, 0.0));
}

namespace {

// The pass over [lo, hi): one chunk's partial result.
template <class Ref, class Run, class Scale>
void bound_pass(Ref ref, Run run, Scale scale, const ArrayView* exact, const BoundOptions& o, std::int64_t lo,
                std::int64_t hi, std::size_t keep, BoundResult& r) {
  const BoundConstants k(o);
  const double ud = k.ud, up = k.up, rn = k.rn, ra = k.ra, a = k.a, c = k.c, eta = k.eta, gamma = k.gamma,
               two = k.two;
  const double sides = exact ? 1 : 2;
  auto worse = [](const BoundElement& x, const BoundElement& y) {
    return x.over != y.over ? x.over > y.over : x.index < y.index;
  };
  for (std::int64_t i = lo; i < hi; ++i) {
    const double av = ref(i), bv = run(i);
    double rho = scale(i);
    if (!std::isfinite(av) || !std::isfinite(bv)) continue;  // the non-finite gate's business
    if (!std::isfinite(rho)) rho = 0;
    const double ya = std::fabs(av), hu = ud * ya + eta;
    const double stat = a * ya + c * rho, side = stat + hu;
    const double extra = o.run_extra ? o.run_extra[i] : 0.0;
    const double run_side = side + extra;
    const double w = after_term(o, i);  // the stored bias-after term (0 without one)
    double err, bound;
    std::optional<double> x;
    if (exact) {
      x = array_element(*exact, i);
      if (std::isnan(*x)) {
        // No exact value to hold the run to: the element cannot be shown within its bound, so it
        // fails (skipped, an oracle of NaNs passed every run).
        err = std::numeric_limits<double>::infinity();
        bound = run_side;
      } else if (!std::isfinite(*x)) {
        continue;
      } else {
        // Judged against the exact value: the run's own error within one side's bound. A run at
        // least as close to exact as the reference never fails, whatever the bound. A run farther
        // from it is also held to the stored choice's two-stack bound against the reference.
        err = std::fabs(bv - *x);
        bound = std::max(run_side, std::fabs(av - *x));
        // The other route's output lies within W of the reference's, so within W + |ref - exact|
        // of the exact value, and within that route's noise-model bound (the cap).
        if (o.after)
          bound = std::max(bound, std::min(w + std::fabs(av - *x), stat + k.ud_b * ya + k.eta_b + extra));
        const double apart = std::fabs(bv - av);
        if (o.choice && err > std::fabs(av - *x)) {
          const double tight = choice_bound(*o.choice, i, o, a * ya, av, bv, extra);
          if (apart > tight) bound = std::min(bound, tight * err / apart);  // over: apart / tight
        }
      }
    } else {
      // Two correct stacks: each within its bound of the exact value, their lambda terms in
      // root-sum-square (independent roundings), the stored roundings once per side (one ULP
      // between them); a stored choice term, when smaller, instead.
      err = std::fabs(bv - av);
      bound = two * stat + 2 * hu + extra;
      if (o.choice) bound = std::min(bound, choice_bound(*o.choice, i, o, a * ya, av, bv, extra));
      // The bias added after the stored sum: the other route's stored output, W from the
      // reference's, never more than that route's noise-model bound.
      if (o.after) bound = std::max(bound, std::min(w, two * stat + 2 * (k.ud_b * ya + k.eta_b) + extra));
    }
    ++r.checked;
    const double over = bound > 0 ? err / bound : (err > 0 ? std::numeric_limits<double>::infinity() : 0);
    if (over > r.max_over) r.max_over = over;
    double wc = sides * (gamma * (ya + ra * rho) + up * rn * rho + hu) + (run_side - side);
    if (o.after) wc = std::max(wc, w + (x ? std::fabs(av - *x) : 0.0));
    if (wc > 0 && err / wc > r.max_worst_case_over) r.max_worst_case_over = err / wc;
    if (err <= bound) continue;
    ++r.beyond;
    BoundElement el{i, av, bv, bound, x, over, ulp_distance(static_cast<float>(av), static_cast<float>(bv), o.dtype)};
    r.max_failing_ulp = std::max(r.max_failing_ulp, el.ulp);
    if (x && std::fabs(av - *x) < std::fabs(bv - *x)) ++r.ref_nearer;
    if (r.worst.size() < keep || worse(el, r.worst.back())) {
      if (r.worst.size() == keep) r.worst.pop_back();
      r.worst.insert(std::upper_bound(r.worst.begin(), r.worst.end(), el, worse), el);
    }
  }
}

// The scale's elements [lo, hi) as float: float32 in place, float16 widened into `buf`.
const float* scale_floats(const ArrayView& scale, std::int64_t lo, std::int64_t hi, std::vector<float>& buf) {
  if (scale.storage == DType::float32) return reinterpret_cast<const float*>(scale.data) + lo;
  buf.resize(static_cast<std::size_t>(hi - lo));
  detail::kernels().half_to_float(reinterpret_cast<const std::uint16_t*>(scale.data) + lo, buf.data(),
                                  static_cast<int>(buf.size()));
  return buf.data();
}

// The common case, two float32 runs that agree: one branch-free pass over the n elements from pr,
// pu and ps (the chunk's start), in the metric kernels' widest vectors (metrics_kernel.inc,
// bound_fast: the same operations per element on every ISA). It answers only when no element is
// beyond its bound and every value is finite; otherwise (false) the chunk takes bound_pass, which
// names the failing elements.
// pz: the chunk's stored dL/dy choice terms (BoundOptions::choice) or bias-after terms
// (BoundOptions::after) widened to float, or null; px: the run's algorithm terms from the chunk's
// start (BoundOptions::run_extra), or null.
bool fast_pass(const float* pr, const float* pu, const float* ps, const float* pz, const double* px, std::int64_t n,
               const BoundOptions& o, BoundResult& r) {
  const BoundConstants k(o);
  // The worst case's up rn rho as the scalar bound forms it; choice_bound's sqrt(2) a |y| as
  // (sqrt(2) a) |y|, which may differ from bound_pass's sqrt(2) (a |y|) in the last bit: the fast
  // pass answers only for a chunk with no element beyond its bound, and never reports a bound.
  detail::BoundFastParams p{k.ud, k.up * k.rn, k.ra, k.a,           k.c,          k.eta,
                            k.gamma, k.two,   o.scale_unit, choice_factor(o), kSqrt2 * k.a};
  if (o.after) p.z_unit = o.after_unit, p.z_floor = true, p.ud_b = k.ud_b, p.eta_b = k.eta_b;
  if (o.choice) {  // stored_roundings, from each value's exponent bits
    const double low = dtype_ulp(0, o.dtype);  // the subnormal spacing
    p.half_scale = 0.5 * dtype_ulp(1, o.dtype), p.min_half = 0.5 * low, p.eta2 = 2 * o.n * 0x1p-150;
  }
  detail::BoundFastOut out;
  detail::kernels().bound_fast(pr, pu, ps, pz, px, n, p, out);
  if (out.beyond || !out.finite) return false;
  r.checked += n;
  r.max_over = std::max(r.max_over, out.max_over);
  r.max_worst_case_over = std::max(r.max_worst_case_over, out.max_wc);
  return true;
}

}  // namespace

Result<BoundResult> check_bounds(const ArrayView& ref, const ArrayView& run, const ArrayView& scale,
                                 const ArrayView* exact, const BoundOptions& o, std::size_t keep, int threads) {
  if (ref.numel != run.numel || scale.numel != ref.numel || (exact && exact->numel != ref.numel) ||
      (o.choice && o.choice->numel != ref.numel) || (o.after && o.after->numel != ref.numel))
    return Error{"error-bound check: element counts differ"};
  if (keep == 0) keep = 1;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::int64_t n = ref.numel, chunk = std::int64_t(1) << 18;
  const std::int64_t chunks = (n + chunk - 1) / chunk;
  std::vector<BoundResult> parts(static_cast<std::size_t>(std::max<std::int64_t>(chunks, 1)));
  std::atomic<std::int64_t> next{0};
  auto work = [&] {
    for (std::int64_t k; (k = next.fetch_add(1)) < chunks;) {
      const std::int64_t lo = k * chunk, hi = std::min(n, lo + chunk);
      auto& part = parts[static_cast<std::size_t>(k)];
      // Float32 values are read directly (the common case), with a float16 scale widened once a
      // chunk for both passes; other storages per element.
      const double unit = o.scale_unit;
      const bool f32 = ref.storage == DType::float32 && run.storage == DType::float32;
      if (f32 && (scale.storage == DType::float32 || scale.storage == DType::float16)) {
        thread_local std::vector<float> widened;
        const float *pr = reinterpret_cast<const float*>(ref.data), *pu = reinterpret_cast<const float*>(run.data),
                    *ps = scale_floats(scale, lo, hi, widened);  // element lo at ps[0]
        // A stored term (a gradient's dL/dy choice or an output's bias-after term; never both).
        const ArrayView* stored = o.after ? o.after : o.choice;
        const bool stored_f = stored && (stored->storage == DType::float32 || stored->storage == DType::float16);
        thread_local std::vector<float> widened_choice;
        const float* pz = stored_f ? scale_floats(*stored, lo, hi, widened_choice) : nullptr;
        // The run's algorithm term is added as bound_pass adds it; beside a stored term bound_pass
        // alone forms the bound (its sqrt(2) a |y| is rounded another way).
        const double* px = o.run_extra ? o.run_extra + lo : nullptr;
        if (!exact && (!stored || stored_f) && !(px && stored) && !(o.after && o.choice) &&
            fast_pass(pr + lo, pu + lo, ps, pz, px, hi - lo, o, part))
          continue;
        bound_pass([pr](std::int64_t i) { return static_cast<double>(pr[i]); },
                   [pu](std::int64_t i) { return static_cast<double>(pu[i]); },
                   [ps, lo, unit](std::int64_t i) { return ps[i - lo] * unit; }, exact, o, lo, hi, keep, part);
      } else {
        bound_pass([&](std::int64_t i) { return array_element(ref, i); }, [&](std::int64_t i) { return array_element(run, i); },
                   [&](std::int64_t i) { return array_element(scale, i) * unit; }, exact, o, lo, hi, keep, part);
      }
    }
  };
  const int nt = static_cast<int>(std::min<std::int64_t>(threads, chunks));
  std::vector<std::thread> pool;
  for (int t = 1; t < nt; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  // Merged in chunk order: the result does not depend on the thread count.
  BoundResult r;
  r.against_exact = exact != nullptr;
  auto worse = [](const BoundElement& x, const BoundElement& y) {
    return x.over != y.over ? x.over > y.over : x.index < y.index;
  };
  for (auto& p : parts) {
    r.checked += p.checked;
    r.beyond += p.beyond;
    r.ref_nearer += p.ref_nearer;
    r.max_over = std::max(r.max_over, p.max_over);
    r.max_worst_case_over = std::max(r.max_worst_case_over, p.max_worst_case_over);
    r.max_failing_ulp = std::max(r.max_failing_ulp, p.max_failing_ulp);
    r.worst.insert(r.worst.end(), p.worst.begin(), p.worst.end());
  }
  std::sort(r.worst.begin(), r.worst.end(), worse);
  if (r.worst.size() > keep) r.worst.resize(keep);
  return r;
}

double legacy_rtol(const std::string& dtype, bool gradient) {
  if (dtype == "bfloat16") return 4e-2;
  if (dtype == "float16") return gradient ? 3e-2 : 1e-2;
  return 5e-4;
}

double legacy_loss_abs(const std::string& dtype) { return dtype == "float16" ? 1e-5 : 1e-4; }

}  // namespace validate::compare
