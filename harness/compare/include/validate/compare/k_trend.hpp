#pragma once
// How the rounding-sized failures of a set move with the reduction length K (compare_k_trend.cpp;
// docs/compare.md, "When no mistake explains a failure"): the log-log slope of each tensor's
// largest |error| / bound (per sqrt(2 ln N)) against K, over the tensors of one variant, dtype, op
// and tensor name. Reported as a fact: correct stacks span the slopes every cause would show
// (compare_k_trend.cpp), so it names none.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "validate/compare/comparison.hpp"

namespace validate::compare {

// The fit: the slope and its standard error, the cases and K range fitted, and its shape: "flat",
// "falling", "growing", or "" (between them, or too scattered).
struct KTrend {
  double slope = 0, se = 0, k_min = 0, k_max = 0;
  int cases = 0;
  std::string trend;
};
// A shape is named within kKTrendBand of its slope (-1/2, 0, +1/2) with a standard error of at most
// kKTrendMaxSe.
constexpr double kKTrendBand = 0.15, kKTrendMaxSe = 0.1;
// The fit over (K, inflation) points; nullopt with fewer than 3 distinct K.
std::optional<KTrend> fit_k_trend(const std::vector<std::pair<double, double>>& k_and_inflation);
// The sentence for `what` ("float32 conv2d output"): the fit, its shape when named, and why it names
// no cause.
std::string k_trend_sentence(const KTrend& t, const std::string& what);
// For each variant, dtype, op and output tensor with a rounding-sized failure and 3 or more
// distinct K among its passed and rounding-sized tensors (outputs only: K is their reduction length): the fit, added to each rounding-sized failure's
// diagnosis (profile "k_trend", and the sentence).
void refine_k_trends(std::vector<Entry>& entries);

}  // namespace validate::compare
