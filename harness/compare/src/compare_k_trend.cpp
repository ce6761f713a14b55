// How a rounding-sized failure moves with the reduction length K across a set (docs/compare.md,
// "When no mistake explains a failure"): per tensor, the largest |error| over its bound, divided by
// sqrt(2 ln N) (where the largest of N normal values sits, so tensors of different sizes compare),
// fitted against K in log-log over the tensors of one variant, dtype, op and tensor name. The fit is
// reported as a fact and names no cause. By the bound's model a correct sum stays flat, operands
// rounded before the products (TF32) fall as K^-1/2 and a truncating accumulator grows as K^+1/2
// relative to the stack's own slope; but correct stacks' own slopes span K^-0.75 to K^+0.25 over
// parts of the default sweep (a blocked sum errs less than the in-order sum the bound assumes, more
// so as K grows), so the slope of a failure does not tell which of the three moved it.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "validate/core/tensor.hpp"

#include <fmt/format.h>

#include "validate/compare/k_trend.hpp"

namespace validate::compare {

namespace {

bool rounding_sized(const Entry& e) {
  return e.verdict == Verdict::failed && e.diagnosis && e.diagnosis->matches.empty() &&
         e.diagnosis->summary.rfind("no layout or precision mistake explains", 0) == 0;
}

// The error-bound check's value (largest |error| / bound), per sqrt(2 ln N); nullopt without one.
std::optional<double> inflation(const Entry& e) {
  const std::int64_t n = shape_numel(e.shape);
  if (e.K < 1 || n < 2) return std::nullopt;
  for (const Check& c : e.checks)
    if (c.name == "error_bound" && c.value > 0 && std::isfinite(c.value))
      return c.value / std::sqrt(2 * std::log(static_cast<double>(n)));
  return std::nullopt;
}

}  // namespace

std::optional<KTrend> fit_k_trend(const std::vector<std::pair<double, double>>& k_and_inflation) {
  std::set<double> ks;
  for (const auto& [k, v] : k_and_inflation) ks.insert(k);
  if (ks.size() < 3) return std::nullopt;
  const double n = static_cast<double>(k_and_inflation.size());
  double sx = 0, sy = 0;
  for (const auto& [k, v] : k_and_inflation) sx += std::log(k), sy += std::log(v);
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0;
  for (const auto& [k, v] : k_and_inflation) {
    const double dx = std::log(k) - mx;
    sxx += dx * dx, sxy += dx * (std::log(v) - my);
  }
  KTrend t;
  t.slope = sxy / sxx;
  double ss = 0;
  for (const auto& [k, v] : k_and_inflation) {
    const double r = std::log(v) - my - t.slope * (std::log(k) - mx);
    ss += r * r;
  }
  t.se = std::sqrt(ss / (n - 2) / sxx);
  t.cases = static_cast<int>(k_and_inflation.size());
  t.k_min = *ks.begin(), t.k_max = *ks.rbegin();
  // The shape, named when the slope is within 0.15 of -1/2, 0 or +1/2 and its standard error at most
  // 0.1: a description of the numbers, not a cause (see the top of this file).
  const double centers[3] = {-0.5, 0, 0.5};
  const char* names[3] = {"falling", "flat", "growing"};
  for (int c = 0; c < 3; ++c)
    if (std::fabs(t.slope - centers[c]) <= kKTrendBand && t.se <= kKTrendMaxSe) t.trend = names[c];
  return t;
}

std::string k_trend_sentence(const KTrend& t, const std::string& what) {
  const std::string shape = t.trend.empty() ? "" : "; " + t.trend + " with K";
  return fmt::format("Across {} {} tensors of K {:g} to {:g}, the largest error over its bound (per sqrt(2 ln N)) "
                     "goes as K^{:.2f} (log-log slope {:.2f} +- {:.2f}{}). The slope names no cause: correct "
                     "stacks' own slopes against the bound run from -0.75 to +0.25, wider than what separates a "
                     "transform algorithm, rounded operands and a narrow accumulator (+-0.5).",
                     t.cases, what, t.k_min, t.k_max, t.slope, t.slope, t.se, shape);
}

void refine_k_trends(std::vector<Entry>& entries) {
  using Key = std::tuple<std::string, std::string, std::string, std::string>;
  std::map<Key, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    // Outputs only: K is an output's reduction length; a gradient's is another (grad_bias sums
    // N HO WO terms whatever K), so its ratio to the bound does not follow K.
    if (!e.op || e.role != ops::Role::output || !inflation(e)) continue;
    if (e.verdict != Verdict::passed && !rounding_sized(e)) continue;
    groups[{e.variant, e.dtype, e.op_name(), e.tensor}].push_back(i);
  }
  for (const auto& [key, idx] : groups) {
    if (std::none_of(idx.begin(), idx.end(), [&](std::size_t i) { return rounding_sized(entries[i]); })) continue;
    std::vector<std::pair<double, double>> points;
    for (std::size_t i : idx) points.emplace_back(static_cast<double>(entries[i].K), *inflation(entries[i]));
    const auto t = fit_k_trend(points);
    if (!t) continue;
    const std::string what = fmt::format("{} {} {}", std::get<1>(key), std::get<2>(key), std::get<3>(key));
    const std::string s = k_trend_sentence(*t, what);
    for (std::size_t i : idx) {
      if (!rounding_sized(entries[i])) continue;
      Diagnosis& d = *entries[i].diagnosis;
      d.profile["k_trend"] = {{"slope", t->slope}, {"se", t->se},     {"cases", t->cases},
                              {"k_min", t->k_min}, {"k_max", t->k_max}, {"trend", t->trend}};
      d.summary += " " + s;
    }
  }
}

}  // namespace validate::compare
