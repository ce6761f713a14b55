// How a set's rounding-sized failures move with K (validate/compare/k_trend.hpp): on synthetic
// sets whose inflation goes as K^slope exactly, or with a known scatter, the fitted slope and its
// shape; no fit with fewer than 3 distinct K, no shape between the shapes; and never a cause named.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "validate/compare/k_trend.hpp"

using namespace validate;
using namespace validate::compare;

namespace {

// Points (K, c K^slope) at the smoke and default sweeps' K, each scattered by a factor
// exp(N(0, scatter)) (seeded).
std::vector<std::pair<double, double>> points(double slope, double scatter, unsigned seed = 3) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(0, 1);
  std::vector<std::pair<double, double>> p;
  for (double k : {18.0, 30.0, 72.0, 144.0, 576.0, 1152.0, 4608.0})
    p.emplace_back(k, 1.7 * std::pow(k, slope) * std::exp(scatter * d(gen)));
  return p;
}

// A failure nothing explains, of variant "", as compare leaves it before the refinement.
Entry rounding_sized_entry(const std::string& dtype, std::int64_t k, double over) {
  Entry e;
  e.dtype = dtype, e.case_name = "k" + std::to_string(k), e.op = ops::Op::conv2d, e.tensor = "output";
  e.role = ops::Role::output, e.shape = {2, 7, 5, 9}, e.K = k, e.verdict = Verdict::failed;
  e.checks.push_back(Check{"error_bound", over, 1.0, true, over <= 1});
  Diagnosis d;
  d.summary = "no layout or precision mistake explains this: 3 element(s) up to 1.2x their error bound";
  e.diagnosis = d;
  return e;
}

}  // namespace

TEST(KTrend, AnExactPowerLawIsFittedToItsSlopeAndShape) {
  for (const auto& [slope, name] : {std::pair{0.0, "flat"}, {-0.5, "falling"}, {0.5, "growing"}}) {
    const auto t = fit_k_trend(points(slope, 0));
    ASSERT_TRUE(t);
    EXPECT_NEAR(t->slope, slope, 1e-12);
    EXPECT_NEAR(t->se, 0, 1e-12);
    EXPECT_EQ(t->trend, name);
    EXPECT_EQ(t->cases, 7);
    EXPECT_EQ(t->k_min, 18);
    EXPECT_EQ(t->k_max, 4608);
  }
}

// A scatter of 10% per tensor over K 18 to 4608 (5.5 e-folds): slope standard error about
// 0.1 / (sd of ln K = 1.9) / sqrt(7) = 0.02, so every shape is still given, its slope within 0.1.
TEST(KTrend, AScatterOfTenPercentStillGivesEachShape) {
  for (const auto& [slope, name] : {std::pair{0.0, "flat"}, {-0.5, "falling"}, {0.5, "growing"}})
    for (unsigned seed = 1; seed <= 5; ++seed) {
      const auto t = fit_k_trend(points(slope, 0.1, seed));
      ASSERT_TRUE(t);
      EXPECT_NEAR(t->slope, slope, 0.1) << seed;
      EXPECT_LT(t->se, 0.05) << seed;
      EXPECT_EQ(t->trend, name) << seed;
    }
}

TEST(KTrend, NoFitWithTwoDistinctKAndNoShapeBetweenTheShapes) {
  EXPECT_FALSE(fit_k_trend({{72, 1.2}, {72, 1.3}, {144, 1.1}, {144, 1.0}}));
  const auto between = fit_k_trend(points(0.25, 0));  // halfway from flat to growing
  ASSERT_TRUE(between);
  EXPECT_NEAR(between->slope, 0.25, 1e-12);
  EXPECT_EQ(between->trend, "");
  EXPECT_EQ(k_trend_sentence(*between, "float32 conv2d output"),
            "Across 7 float32 conv2d output tensors of K 18 to 4608, the largest error over its bound (per sqrt(2 ln "
            "N)) goes as K^0.25 (log-log slope 0.25 +- 0.00). The slope names no cause: correct stacks' own slopes "
            "against the bound run from -0.75 to +0.25, wider than what separates a transform algorithm, rounded "
            "operands and a narrow accumulator (+-0.5).");
  // A scatter of a factor e per tensor: the slope's standard error is far above 0.1.
  const auto noisy = fit_k_trend(points(0, 1.0, 4));
  ASSERT_TRUE(noisy);
  EXPECT_GT(noisy->se, kKTrendMaxSe);
  EXPECT_EQ(noisy->trend, "");
}

// Over a report: the float32 outputs (K 72, 144, 576; inflation falling as K^-1/2, what TF32 operands
// would show against a flat correct stack) get the fit and its shape and no cause; the bfloat16 ones
// (two distinct K) nothing, and an entry with a named mistake is left out of the fit.
TEST(KTrend, TheReportsRoundingSizedFailuresGetTheirGroupsFitAndNoCause) {
  std::vector<Entry> es;
  const double n = std::sqrt(2 * std::log(2.0 * 7 * 5 * 9));  // the fit's per sqrt(2 ln N)
  for (std::int64_t k : {72, 144, 576}) es.push_back(rounding_sized_entry("float32", k, 30 * n / std::sqrt(k)));
  for (std::int64_t k : {72, 144}) es.push_back(rounding_sized_entry("bfloat16", k, 1.3));
  Entry named = rounding_sized_entry("float32", 4608, 100);
  named.diagnosis->summary = "run output: recomputed with the input and weight rounded to tf32";
  es.push_back(named);
  refine_k_trends(es);
  for (int i = 0; i < 3; ++i) {
    const auto& d = *es[static_cast<std::size_t>(i)].diagnosis;
    EXPECT_NE(d.summary.find("slope -0.50 +- 0.00; falling with K). The slope names no cause"), std::string::npos)
        << d.summary;
    for (const char* cause : {"TF32", "operand precision", "transform algorithm (", "not a precision mistake"})
      EXPECT_EQ(d.summary.find(cause), std::string::npos) << cause << ": " << d.summary;
    EXPECT_NE(d.summary.find("Across 3 float32 conv2d output tensors of K 72 to 576"), std::string::npos) << d.summary;
    EXPECT_NEAR(d.profile["k_trend"]["slope"].get<double>(), -0.5, 1e-9);
  }
  EXPECT_FALSE(es[3].diagnosis->profile.contains("k_trend"));
  EXPECT_EQ(es[3].diagnosis->summary.find("Across"), std::string::npos);
  EXPECT_FALSE(es[5].diagnosis->profile.contains("k_trend"));
}
