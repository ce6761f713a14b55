// The streaming metric engine against an independent, naive implementation written here, plus
// hand-built cases (one-ULP perturbation, NaN/Inf positions, atol-OR-rtol).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "validate/metrics/metrics.hpp"
#include "validate/metrics/ulp.hpp"

using namespace validate;
using namespace validate::compare;

namespace {

std::vector<float> random_values(std::size_t n, unsigned seed, DType logical, float offset = 0) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = round_to_dtype(offset + dist(gen), logical);
  return v;
}

// Next representable value above x in the logical dtype.
float next_up(float x, DType logical) {
  if (logical == DType::float32) return std::nextafter(x, std::numeric_limits<float>::infinity());
  if (logical == DType::bfloat16) {
    std::uint16_t b = float_to_bfloat16_bits(x);
    b = (b & 0x8000) ? ((b == 0x8000) ? 0x0001 : b - 1) : b + 1;
    return bfloat16_bits_to_float(b);
  }
  std::uint16_t h = float_to_float16_bits(x);
  h = (h & 0x8000) ? ((h == 0x8000) ? 0x0001 : h - 1) : h + 1;
  return float16_bits_to_float(h);
}

ArrayView engine_view(const std::vector<float>& v) {
  return ArrayView{reinterpret_cast<const std::byte*>(v.data()), DType::float32,
                   static_cast<std::int64_t>(v.size()), false};
}

struct Naive {
  double floor = 0, max_abs = 0, mean_abs = 0, max_rel = 0;
  std::uint64_t max_ulp = 0, max_ulp_nz = 0;
  double mean_ulp = 0;
  std::int64_t n_reg = 0, n_nz = 0, beyond = 0, worst = -1;
  double pcc = 0;
};

Naive naive(const std::vector<float>& r, const std::vector<float>& x, DType logical,
            std::optional<double> atol, std::optional<double> rtol,
            std::optional<std::uint64_t> max_ulp) {
  Naive o;
  double mx = 0;
  for (float v : r) mx = std::max(mx, static_cast<double>(std::fabs(v)));
  const double min_norm =
      logical == DType::float16 ? std::ldexp(1.0, -14) : std::numeric_limits<float>::min();
  o.floor = std::max(0.01 * mx, min_norm);
  const float fl = static_cast<float>(o.floor);
  double su = 0, sa = 0, mr = 0, mxm = 0;
  for (std::size_t i = 0; i < r.size(); ++i) {
    const float d = std::fabs(x[i] - r[i]);
    const float g = std::max(std::fabs(r[i]), fl);
    const bool nz = std::fabs(r[i]) < fl;
    const std::uint64_t u = ulp_distance(r[i], x[i], logical);
    if (d > o.max_abs) {
      o.max_abs = d;
      o.worst = static_cast<std::int64_t>(i);
    }
    sa += d;
    o.max_rel = std::max(o.max_rel, static_cast<double>(d / g));
    if (nz) {
      o.max_ulp_nz = std::max(o.max_ulp_nz, u);
      ++o.n_nz;
    } else {
      o.max_ulp = std::max(o.max_ulp, u);
      su += static_cast<double>(u);
      ++o.n_reg;
    }
    bool fail = false;
    if (atol || rtol) {
      const float t =
          std::max(static_cast<float>(atol.value_or(0)), static_cast<float>(rtol.value_or(0)) * g);
      fail = d > t;
    }
    if (max_ulp && !nz && u > *max_ulp) fail = true;
    o.beyond += fail;
    mr += r[i];
    mxm += x[i];
  }
  const double n = static_cast<double>(r.size());
  o.mean_abs = sa / n;
  o.mean_ulp = o.n_reg ? su / static_cast<double>(o.n_reg) : 0;
  mr /= n;
  mxm /= n;
  double c = 0, a2 = 0, b2 = 0;
  for (std::size_t i = 0; i < r.size(); ++i) {
    const double a = r[i] - mr, b = x[i] - mxm;
    c += a * b;
    a2 += a * a;
    b2 += b * b;
  }
  o.pcc = c / std::sqrt(a2 * b2);
  return o;
}

}  // namespace

class MetricsPerDtype : public ::testing::TestWithParam<DType> {};

TEST_P(MetricsPerDtype, OneUlpPerturbationIsExactlyOne) {
  const DType logical = GetParam();
  auto r = random_values(10007, 1, logical);
  std::vector<float> x(r.size());
  for (std::size_t i = 0; i < r.size(); ++i) x[i] = next_up(r[i], logical);
  MetricOptions opt;
  opt.logical = logical;
  auto st = compute_metrics(engine_view(r), engine_view(x), opt);
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(st->ulp.max, 1u);
  EXPECT_EQ(st->ulp_near_zero.max, 1u);
  EXPECT_DOUBLE_EQ(st->ulp.mean, 1.0);
  EXPECT_EQ(st->ulp.p50, 1u);
  EXPECT_EQ(st->ulp.p999, 1u);
  ASSERT_EQ(st->ulp.histogram.size(), 2u);
  EXPECT_EQ(st->ulp.histogram[0], 0u);
  EXPECT_EQ(static_cast<std::int64_t>(st->ulp.histogram[1] + st->ulp_near_zero.histogram[1]),
            st->numel);
  EXPECT_EQ(st->compared, st->numel);
}

TEST_P(MetricsPerDtype, MatchesNaiveImplementation) {
  const DType logical = GetParam();
  for (std::size_t n : {1u, 7u, 8u, 1000u, 1024u, 1031u, 70001u}) {
    auto r = random_values(n, 2, logical);
    auto noise = random_values(n, 3, DType::float32);
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = round_to_dtype(r[i] + 0.01f * noise[i], logical);
    MetricOptions opt;
    opt.logical = logical;
    opt.rtol = 0.01;
    opt.max_ulp = 3;
    opt.chunk_elements = 4096;  // several chunks, so merging is exercised
    auto st = compute_metrics(engine_view(r), engine_view(x), opt);
    ASSERT_TRUE(st);
    const Naive nv = naive(r, x, logical, std::nullopt, 0.01, 3u);
    EXPECT_DOUBLE_EQ(st->near_zero_floor, nv.floor) << n;
    EXPECT_DOUBLE_EQ(st->max_abs, nv.max_abs) << n;
    EXPECT_NEAR(st->mean_abs, nv.mean_abs, 1e-6 * nv.mean_abs + 1e-30) << n;
    EXPECT_FLOAT_EQ(static_cast<float>(st->max_rel), static_cast<float>(nv.max_rel)) << n;
    EXPECT_EQ(st->ulp.max, nv.max_ulp) << n;
    EXPECT_EQ(st->ulp_near_zero.max, nv.max_ulp_nz) << n;
    EXPECT_EQ(st->ulp.count, nv.n_reg) << n;
    EXPECT_EQ(st->ulp_near_zero.count, nv.n_nz) << n;
    EXPECT_NEAR(st->ulp.mean, nv.mean_ulp, 1e-9 * (1 + nv.mean_ulp)) << n;
    EXPECT_EQ(st->beyond_tolerance, nv.beyond) << n;
    EXPECT_EQ(st->worst_abs.index, nv.worst) << n;
    if (n > 1) {
      EXPECT_NEAR(st->pcc, nv.pcc, 2e-6 * (1 - nv.pcc) + 1e-12) << n;  // see metrics_kernel.inc
    }
  }
}

TEST_P(MetricsPerDtype, IndependentOfThreadCountAndChunking) {
  const DType logical = GetParam();
  auto r = random_values(300000, 4, logical);
  auto x = random_values(300000, 5, logical);
  MetricOptions a, b;
  a.logical = b.logical = logical;
  a.threads = 1;
  b.threads = 2;
  a.chunk_elements = b.chunk_elements = 8192;
  auto sa = compute_metrics(engine_view(r), engine_view(x), a), sb = compute_metrics(engine_view(r), engine_view(x), b);
  ASSERT_TRUE(sa && sb);
  EXPECT_EQ(sa->mean_abs, sb->mean_abs);
  EXPECT_EQ(sa->pcc, sb->pcc);
  EXPECT_EQ(sa->ulp.p99, sb->ulp.p99);
  EXPECT_EQ(sa->ulp.histogram, sb->ulp.histogram);
  EXPECT_EQ(sa->worst_ulp.index, sb->worst_ulp.index);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, MetricsPerDtype,
                         ::testing::Values(DType::float32, DType::bfloat16, DType::float16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Metrics, Float16StorageEqualsFloat32Storage) {
  auto r = random_values(5000, 6, DType::float16);
  auto x = random_values(5000, 7, DType::float16);
  Tensor rh(DType::float16, {5000}), xh(DType::float16, {5000});
  for (int i = 0; i < 5000; ++i) {
    rh.set(i, r[static_cast<std::size_t>(i)]);
    xh.set(i, x[static_cast<std::size_t>(i)]);
  }
  MetricOptions opt;
  opt.logical = DType::float16;
  auto a = compute_metrics(engine_view(r), engine_view(x), opt),
       b = compute_metrics(view_of(rh), view_of(xh), opt);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->ulp.max, b->ulp.max);
  EXPECT_EQ(a->ulp.histogram, b->ulp.histogram);
  EXPECT_EQ(a->max_abs, b->max_abs);
}

TEST(Metrics, NonFinitePositionsMustAgree) {
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  std::vector<float> r(2000, 1.0f), x(2000, 1.0f);
  r[10] = nan;
  x[10] = nan;  // both NaN: agree
  r[20] = inf;
  x[20] = inf;  // same infinity: agree
  auto ok = compute_metrics(engine_view(r), engine_view(x), MetricOptions{});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->nonfinite.mismatches(), 0);
  EXPECT_EQ(ok->beyond_tolerance, 0);
  EXPECT_EQ(ok->compared, 1998);
  x[30] = nan;     // NaN in the run only
  x[1500] = -inf;  // finite reference, infinite run
  r[1999] = -inf;
  x[1999] = inf;  // opposite infinities
  auto bad = compute_metrics(engine_view(r), engine_view(x), MetricOptions{});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->nonfinite.nan_mismatch, 1);
  EXPECT_EQ(bad->nonfinite.inf_mismatch, 2);
  EXPECT_EQ(bad->nonfinite.first_mismatch, 30);
  EXPECT_EQ(bad->beyond_tolerance, 3);
  EXPECT_EQ(bad->max_abs, 0.0);  // non-finite elements are left out of the error statistics
}

// Elements pass when |run - ref| <= atol OR |run - ref| <= rtol * max(|ref|, floor), not numpy's
// atol + rtol * |ref|. Element 2 passes numpy's allclose (1.2 <= 0.5 + 1.0) but fails here.
TEST(Metrics, AtolOrRtolSemantics) {
  std::vector<float> r = {1000.f, 100.f, 100.f, 10.f, 10.f};
  std::vector<float> x = {1000.f, 100.9f, 101.2f, 10.4f, 10.7f};
  MetricOptions opt;
  opt.atol = 0.5;
  opt.rtol = 0.01;
  auto st = compute_metrics(engine_view(r), engine_view(x), opt);
  ASSERT_TRUE(st);
  EXPECT_DOUBLE_EQ(st->near_zero_floor, 10.0);
  EXPECT_EQ(st->beyond_tolerance, 2);  // elements 2 and 4
  EXPECT_EQ(st->first_beyond, 2);
  opt.atol.reset();  // rtol alone: element 3 (0.4 > 0.01 * 10) now fails too
  st = compute_metrics(engine_view(r), engine_view(x), opt);
  EXPECT_EQ(st->beyond_tolerance, 3);
  opt.atol = 0.5;
  opt.rtol.reset();  // atol alone: 1, 2, 4 fail
  st = compute_metrics(engine_view(r), engine_view(x), opt);
  EXPECT_EQ(st->beyond_tolerance, 3);
}

TEST(Metrics, PearsonStableUnderLargeOffset) {
  auto r = random_values(100000, 8, DType::float32, 1e4f);
  auto noise = random_values(100000, 9, DType::float32);
  std::vector<float> x(r.size());
  for (std::size_t i = 0; i < r.size(); ++i) x[i] = r[i] + 0.1f * noise[i];
  auto st = compute_metrics(engine_view(r), engine_view(x), MetricOptions{});
  const Naive nv = naive(r, x, DType::float32, std::nullopt, std::nullopt, std::nullopt);
  ASSERT_TRUE(st);
  // Block sums are float, merged in double: the error scales with 1 - pcc (metrics_kernel.inc).
  EXPECT_NEAR(st->pcc, nv.pcc, 2e-6 * (1 - nv.pcc) + 1e-12);
  EXPECT_LT(st->pcc, 0.999);
  // Unrelated data: pcc near 0, still within 1e-5.
  auto y = random_values(100000, 11, DType::float32, 1e4f);
  auto st2 = compute_metrics(engine_view(r), engine_view(y), MetricOptions{});
  const Naive nv2 = naive(r, y, DType::float32, std::nullopt, std::nullopt, std::nullopt);
  EXPECT_NEAR(st2->pcc, nv2.pcc, 1e-5);
  EXPECT_LT(std::fabs(st2->pcc), 0.05);
}

TEST(Metrics, WorstElementAndMinimumTolerances) {
  std::vector<float> r = {1.f, 2.f, 3.f, 4.f}, x = {1.f, 2.5f, 3.f, 3.f};
  auto st = compute_metrics(engine_view(r), engine_view(x), MetricOptions{});
  ASSERT_TRUE(st);
  EXPECT_EQ(st->worst_abs.index, 3);  // |3 - 4| = 1 > 0.5
  EXPECT_EQ(st->worst_abs.ref, 4.0);
  EXPECT_EQ(st->worst_abs.run, 3.0);
  EXPECT_DOUBLE_EQ(st->min_atol, 1.0);
  EXPECT_DOUBLE_EQ(st->min_rtol, 0.25);  // 0.5 / 2 and 1 / 4
  EXPECT_EQ(st->ref_zeros, 0);
}

TEST(Metrics, CountsReferenceZeros) {
  std::vector<float> r(4096, 0.f), x(4096, 0.f);
  for (int i = 0; i < 100; ++i)
    r[static_cast<std::size_t>(i)] = x[static_cast<std::size_t>(i)] = 1.f;
  r[4000] = -0.0f;
  auto st = compute_metrics(engine_view(r), engine_view(x), MetricOptions{});
  ASSERT_TRUE(st);
  EXPECT_EQ(st->ref_zeros, 3996);
}

TEST(Metrics, RejectsDifferentSizes) {
  std::vector<float> r(10), x(11);
  auto st = compute_metrics(engine_view(r), engine_view(x), MetricOptions{});
  EXPECT_FALSE(st);
}

// A run that returns float32 values off the low-precision grid is measured after rounding to the
// logical dtype (nearest even): a value just below the next grid point is one ULP, not zero.
TEST(Metrics, OffGridRunValuesAreRoundedToTheLogicalDtype) {
  for (DType logical : {DType::bfloat16, DType::float16}) {
    auto r = random_values(4099, 10, logical);
    std::vector<float> x(r.size());
    for (std::size_t i = 0; i < r.size(); ++i) {
      const float up = next_up(r[i], logical);
      x[i] = std::nextafter(up, r[i]);  // float32 just short of the next grid value
    }
    MetricOptions opt;
    opt.logical = logical;
    auto st = compute_metrics(engine_view(r), engine_view(x), opt);
    ASSERT_TRUE(st);
    EXPECT_EQ(st->ulp.max, 1u) << dtype_name(logical);
    EXPECT_DOUBLE_EQ(st->ulp.mean, 1.0)
        << dtype_name(logical);  // truncation would give 0 for positives
    EXPECT_EQ(st->ulp.histogram[0], 0u) << dtype_name(logical);
  }
}
