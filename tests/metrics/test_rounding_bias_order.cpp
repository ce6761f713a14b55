// The rounding-bias sums (rounding_bias.cpp) are sums in a fixed order whose every bit reaches the
// report (z, relative, se): eight lanes, element i into lane i mod 8 in index order, the lanes added
// as ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). The fast passes (terms and sums in one
// vectorized loop, chunked stored terms, masks for the elements left out, a block's runs starting in
// any lane) must give exactly the figures of the plain element-by-element definitions written here,
// on every storage and every block layout, with zeros, NaNs and infinities among the values and
// tensors of every length mod 8 (metrics_tests runs again under each metric kernel's ISA).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "validate/core/dtype.hpp"
#include "validate/metrics/rounding_bias.hpp"

using namespace validate;
using namespace validate::compare;

namespace rounding_bias_order_test {

// ---- The definitions, element by element in index order. ----
// One sum: element i into lane i mod 8.
struct Lanes {
  double l[8] = {};
  void add(std::int64_t i, double v) { l[i % 8] += v; }
  double total() const { return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])); }
};
double rbo_element(const ArrayView& v, std::int64_t i) {
  switch (v.storage) {
    case DType::float64: {
      double d;
      std::memcpy(&d, v.data + i * 8, 8);
      return d;
    }
    case DType::float16: {
      std::uint16_t h;
      std::memcpy(&h, v.data + i * 2, 2);
      return float16_bits_to_float(h);
    }
    default: {
      float f;
      std::memcpy(&f, v.data + i * 4, 4);
      return f;
    }
  }
}

struct DefSums {
  Lanes se, sr, see, ser, srr;
  std::int64_t n = 0, toward = 0, away = 0;
  void add(std::int64_t i, double r, double x) {
    if (!(r != 0) || !std::isfinite(r) || !std::isfinite(x)) return;
    const double e = r > 0 ? x - r : r - x, a = std::fabs(r);
    se.add(i, e), sr.add(i, a), see.add(i, e * e), ser.add(i, e * a), srr.add(i, a * a);
    ++n;
    toward += e < 0;
    away += e > 0;
  }
};

RoundingBias def_independent(const ArrayView& ref, const ArrayView& run, double allowed) {
  RoundingBias b;
  DefSums s;
  for (std::int64_t i = 0; i < ref.numel; ++i) s.add(i, rbo_element(ref, i), rbo_element(run, i));
  b.elements = s.n, b.toward_zero = s.toward, b.away_from_zero = s.away;
  const double se = s.se.total(), sr = s.sr.total();
  if (s.n < 2 || sr <= 0) return b;
  b.relative = se / sr;
  const double spread =
      std::max(0.0, s.see.total() - 2 * b.relative * s.ser.total() + b.relative * b.relative * s.srr.total());
  b.se = std::sqrt(spread) / sr;
  const double excess = std::fabs(b.relative) - allowed;
  if (excess > 0) b.z = b.se > 0 ? excess / b.se : INFINITY;
  return b;
}

RoundingBias def_blocks(const ArrayView& ref, const ArrayView& run, const Shape& shape, const BiasBlocks& bl,
                        double allowed) {
  RoundingBias b;
  const std::size_t rank = shape.size();
  std::vector<std::int64_t> w(rank, 0), idx(rank, 0);
  std::int64_t count = 1;
  for (std::size_t k = bl.axes.size(); k-- > 0;) {
    const auto a = static_cast<std::size_t>(bl.axes[k]);
    w[a] = count, count *= shape[a];
  }
  std::vector<Lanes> lane_e(static_cast<std::size_t>(count)), lane_r(static_cast<std::size_t>(count));
  std::int64_t n = 0, toward = 0, away = 0;
  for (std::int64_t i = 0; i < ref.numel; ++i) {
    std::int64_t blk = 0;
    for (std::size_t a = 0; a < rank; ++a) blk += idx[a] * w[a];
    const double r = rbo_element(ref, i), x = rbo_element(run, i);
    if (r != 0 && std::isfinite(r) && std::isfinite(x)) {
      const double e = r > 0 ? x - r : r - x;
      lane_e[static_cast<std::size_t>(blk)].add(i, e), lane_r[static_cast<std::size_t>(blk)].add(i, std::fabs(r));
      ++n, toward += e < 0, away += e > 0;
    }
    for (std::size_t a = rank; a-- > 0;) {
      if (++idx[a] < shape[a]) break;
      idx[a] = 0;
    }
  }
  b.elements = n, b.toward_zero = toward, b.away_from_zero = away;
  std::vector<double> be(lane_e.size()), br(lane_r.size());
  for (std::size_t k = 0; k < be.size(); ++k) be[k] = lane_e[k].total(), br[k] = lane_r[k].total();
  double se = 0, sr = 0;
  for (std::size_t k = 0; k < be.size(); ++k) se += be[k], sr += br[k], b.blocks += br[k] > 0;
  if (n < 2 || sr <= 0) return b;
  b.relative = se / sr;
  std::vector<double> d(be.size());
  for (std::size_t k = 0; k < d.size(); ++k) d[k] = be[k] - b.relative * br[k];
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
  if (groups < 3) return b;
  b.se = std::sqrt(std::max(v0, v0 + 2 * cov) * groups / (groups - 1)) / sr;
  const double excess = std::fabs(b.relative) - allowed;
  if (excess > 0) b.z = b.se > 0 ? excess / b.se : INFINITY;
  return b;
}

double def_accumulation(const ArrayView& ref, const ArrayView& scale, const BoundOptions& o) {
  const double per = 0x1p-24 * std::sqrt(o.n);
  Lanes acc, mass;
  for (std::int64_t i = 0; i < ref.numel; ++i) {
    const double r = rbo_element(ref, i), sc = rbo_element(scale, i);
    if (!(r != 0) || !std::isfinite(r)) continue;
    double rho = sc * o.scale_unit;
    if (!std::isfinite(rho)) rho = 0;
    acc.add(i, per * (std::fabs(r) + rho));
    mass.add(i, std::fabs(r));
  }
  return mass.total() > 0 ? acc.total() / mass.total() : 0;
}

// ---- Data: a run a few units of roundoff off, leaning a little, with special values. ----
struct Data {
  std::vector<float> ref, run;
  std::vector<std::uint16_t> scale;
};
Data rbo_make(std::int64_t n, unsigned seed, bool specials) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0, 1);
  Data out;
  out.ref.resize(static_cast<std::size_t>(n)), out.run.resize(static_cast<std::size_t>(n));
  out.scale.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    // Magnitudes over 40 binades: sums of such terms are inexact in float64 (sums of values within a
    // few binades of each other would be exact, and blind to the order of the additions).
    const float r = std::ldexp(d(gen), static_cast<int>(gen() % 41) - 20);
    const auto k = static_cast<std::size_t>(i);
    out.ref[k] = r;
    out.run[k] = r * (1 + 3e-7f * d(gen) + 1e-7f);
    out.scale[k] = float_to_float16_bits(std::fabs(d(gen)) * 0.01f);
    if (!specials) continue;
    switch (gen() % 64) {
      case 0: out.ref[k] = 0; break;
      case 1: out.run[k] = std::numeric_limits<float>::quiet_NaN(); break;
      case 2: out.ref[k] = std::numeric_limits<float>::infinity(); break;
      case 3: out.run[k] = -std::numeric_limits<float>::infinity(); break;
      case 4: out.run[k] = out.ref[k]; break;  // x = r: +0 and -0 errors
      case 5: out.scale[k] = 0x7c00; break;   // an infinite scale
      case 6: out.scale[k] = 0x7e00; break;   // a NaN scale
      default: break;
    }
  }
  return out;
}
ArrayView rbo_f32(const std::vector<float>& v) {
  return ArrayView{reinterpret_cast<const std::byte*>(v.data()), DType::float32, static_cast<std::int64_t>(v.size())};
}
ArrayView rbo_f16(const std::vector<std::uint16_t>& v) {
  return ArrayView{reinterpret_cast<const std::byte*>(v.data()), DType::float16, static_cast<std::int64_t>(v.size())};
}

void rbo_expect_same(const RoundingBias& a, const RoundingBias& b) {
  // Bitwise: the report prints every digit.
  EXPECT_EQ(std::memcmp(&a.relative, &b.relative, sizeof(double)), 0) << a.relative << " vs " << b.relative;
  EXPECT_EQ(std::memcmp(&a.se, &b.se, sizeof(double)), 0) << a.se << " vs " << b.se;
  EXPECT_EQ(std::memcmp(&a.z, &b.z, sizeof(double)), 0) << a.z << " vs " << b.z;
  EXPECT_EQ(a.elements, b.elements);
  EXPECT_EQ(a.toward_zero, b.toward_zero);
  EXPECT_EQ(a.away_from_zero, b.away_from_zero);
  EXPECT_EQ(a.blocks, b.blocks);
  EXPECT_EQ(a.dof, b.dof);
  EXPECT_EQ(a.threshold, b.threshold);
}

}  // namespace rounding_bias_order_test

using namespace rounding_bias_order_test;

TEST(RoundingBiasOrder, IndependentElementsMatchTheDefinitionBitForBit) {
  for (bool specials : {false, true})
    for (std::int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 17, 4095, 4096, 4097, 100003, 100006}) {
      const Data d = rbo_make(n, static_cast<unsigned>(n) + specials, specials);
      rbo_expect_same(rounding_bias(rbo_f32(d.ref), rbo_f32(d.run), 1e-9), def_independent(rbo_f32(d.ref), rbo_f32(d.run), 1e-9));
      // Another storage on one side: the chunked path.
      std::vector<double> run64(d.run.begin(), d.run.end());
      const ArrayView r64{reinterpret_cast<const std::byte*>(run64.data()), DType::float64, n};
      rbo_expect_same(rounding_bias(rbo_f32(d.ref), r64, 1e-9), def_independent(rbo_f32(d.ref), r64, 1e-9));
    }
}

TEST(RoundingBiasOrder, BlocksMatchTheDefinitionBitForBit) {
  struct Layout {
    Shape shape;
    BiasBlocks blocks;
  };
  // Runs of one block long (the block axis last), short, long, two block axes with a lag, a tensor
  // not a multiple of the chunk; runs just under and at the length that takes the one-loop path
  // (256), and long runs starting in every lane and crossing chunks (2051).
  const std::vector<Layout> layouts = {
      {{300, 37}, {{1}, 0}},        {{37, 300}, {{0}, 0}},       {{4, 6, 9, 11}, {{0, 2}, 2}},
      {{3, 5, 70, 40}, {{0}, 0}},   {{2, 3, 4, 5000}, {{2}, 0}}, {{8, 3, 17, 19}, {{0, 2}, 1}},
      {{1, 4099}, {{1}, 0}},        {{5, 2, 3}, {{2}, 0}},       {{3, 4, 255}, {{1}, 0}},
      {{3, 4, 256}, {{1}, 0}},       {{3, 7, 2051}, {{1}, 0}},
  };
  for (bool specials : {false, true})
    for (const auto& l : layouts) {
      const Data d = rbo_make(shape_numel(l.shape), static_cast<unsigned>(l.shape.back()) + specials, specials);
      rbo_expect_same(rounding_bias(rbo_f32(d.ref), rbo_f32(d.run), l.shape, l.blocks, 1e-9),
                  def_blocks(rbo_f32(d.ref), rbo_f32(d.run), l.shape, l.blocks, 1e-9));
    }
}

TEST(RoundingBiasOrder, AccumulationBiasMatchesTheDefinitionBitForBit) {
  BoundOptions o;
  o.n = 4608;
  o.scale_unit = 0x1p-10;
  for (bool specials : {false, true})
    for (std::int64_t n : {1, 5, 7, 8, 13, 4096, 4097, 70001, 70004}) {
      const Data d = rbo_make(n, 7u + static_cast<unsigned>(n) + specials, specials);
      const double got = accumulation_bias(rbo_f32(d.ref), rbo_f16(d.scale), o), want = def_accumulation(rbo_f32(d.ref), rbo_f16(d.scale), o);
      EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0) << got << " vs " << want;
      std::vector<float> scale32(d.scale.size());
      for (std::size_t i = 0; i < scale32.size(); ++i) scale32[i] = float16_bits_to_float(d.scale[i]);
      const double got32 = accumulation_bias(rbo_f32(d.ref), rbo_f32(scale32), o);
      EXPECT_EQ(std::memcmp(&got32, &want, sizeof got32), 0) << got32 << " vs " << want;
    }
}

// compare takes the estimate before its allowance (the accumulation bias is summed beside it):
// with_allowance must give the z the estimate would have had, early stops included (too few
// elements, too few groups of blocks).
TEST(RoundingBiasOrder, AnAllowanceAppliedAfterwardsGivesTheSameZ) {
  const Data d = rbo_make(20000, 3u, true);
  const Data small = rbo_make(1, 4u, false);
  for (double allowed : {0.0, 1e-9, 1e-7, 1e-3}) {
    rbo_expect_same(with_allowance(rounding_bias(rbo_f32(d.ref), rbo_f32(d.run), INFINITY), allowed),
                    rounding_bias(rbo_f32(d.ref), rbo_f32(d.run), allowed));
    rbo_expect_same(with_allowance(rounding_bias(rbo_f32(small.ref), rbo_f32(small.run), INFINITY), allowed),
                    rounding_bias(rbo_f32(small.ref), rbo_f32(small.run), allowed));
    for (const Shape& shape : {Shape{200, 100}, Shape{2, 10000}, Shape{4, 5000}}) {
      const BiasBlocks rows{{0}, 0};
      rbo_expect_same(with_allowance(rounding_bias(rbo_f32(d.ref), rbo_f32(d.run), shape, rows, INFINITY), allowed),
                      rounding_bias(rbo_f32(d.ref), rbo_f32(d.run), shape, rows, allowed));
    }
  }
}

// compare takes the estimate and the accumulation bias in one pass over the tensor: each must be the
// definition's, bit for bit, over independent elements and over blocks, with a float16 or float32
// scale, and through the separate functions where the pass does not apply (a float64 run).
TEST(RoundingBiasOrder, TheEstimateAndTheAccumulationInOnePassMatchTheDefinitions) {
  BoundOptions o;
  o.n = 4608;
  o.scale_unit = 0x1p-10;
  auto same_double = [](double got, double want) { EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0) << got << " vs " << want; };
  const std::vector<std::pair<Shape, BiasBlocks>> layouts = {
      {{300, 37}, {{1}, 0}},       {{4, 6, 9, 11}, {{0, 2}, 2}}, {{2, 3, 4, 5000}, {{2}, 0}},
      {{1, 4099}, {{1}, 0}},       {{8, 3, 17, 19}, {{0, 2}, 1}}, {{3, 7, 2051}, {{1}, 0}}};
  for (bool specials : {false, true})
    for (const auto& [shape, blocks] : layouts) {
      const Data d = rbo_make(shape_numel(shape), 11u + static_cast<unsigned>(shape.back()) + specials, specials);
      std::vector<float> scale32(d.scale.size());
      for (std::size_t i = 0; i < scale32.size(); ++i) scale32[i] = float16_bits_to_float(d.scale[i]);
      const double want_acc = def_accumulation(rbo_f32(d.ref), rbo_f16(d.scale), o);
      for (const ArrayView& scale : {rbo_f16(d.scale), rbo_f32(scale32)}) {
        const auto one = rounding_bias_and_accumulation(rbo_f32(d.ref), rbo_f32(d.run), scale, o, shape, nullptr, 1e-9);
        rbo_expect_same(one.bias, def_independent(rbo_f32(d.ref), rbo_f32(d.run), 1e-9));
        same_double(one.accumulated, want_acc);
        const auto blk = rounding_bias_and_accumulation(rbo_f32(d.ref), rbo_f32(d.run), scale, o, shape, &blocks, 1e-9);
        rbo_expect_same(blk.bias, def_blocks(rbo_f32(d.ref), rbo_f32(d.run), shape, blocks, 1e-9));
        same_double(blk.accumulated, want_acc);
      }
      std::vector<double> run64(d.run.begin(), d.run.end());
      const ArrayView r64{reinterpret_cast<const std::byte*>(run64.data()), DType::float64, shape_numel(shape)};
      const auto apart = rounding_bias_and_accumulation(rbo_f32(d.ref), r64, rbo_f16(d.scale), o, shape, &blocks, 1e-9);
      rbo_expect_same(apart.bias, def_blocks(rbo_f32(d.ref), r64, shape, blocks, 1e-9));
      same_double(apart.accumulated, want_acc);
    }
}
