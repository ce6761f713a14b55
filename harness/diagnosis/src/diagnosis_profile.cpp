// A failure no hypothesis explains, measured over the whole tensor (docs/compare.md, "When no
// mistake explains a failure"): how far beyond the gate and the declared computation's own error
// bounds it goes, and statistics that tell the usual rounding-sized causes apart — a sign bias
// against the reference's sign (a truncating or biased conversion), an error RMS that depends on
// the output position modulo a tile size (a tiled transform such as Winograd), and a tail heavier
// than a sum of many roundings gives.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "diagnosis_internal.hpp"
#include "validate/metrics/rounding_bias.hpp"
#include "validate/metrics/ulp.hpp"

namespace validate::compare::detail {

namespace {

// The error-scale exponent (error_scale): named local from 0.6, the norm up to 0.3 (between, the
// number alone); each quartile at least 32 elements.
constexpr double kScaleLocal = 0.6, kScaleNorm = 0.3;
constexpr std::int64_t kScaleQuartileMin = 32;

// The elements profiled: every one, or a stratified sample of 1M above in.confirm_all_limit.
std::vector<std::int64_t> profiled_positions(const DiagnosisInput& in, std::int64_t numel) {
  if (numel <= in.confirm_all_limit) {
    std::vector<std::int64_t> all(static_cast<std::size_t>(numel));
    for (std::int64_t i = 0; i < numel; ++i) all[static_cast<std::size_t>(i)] = i;
    return all;
  }
  return sample_positions(numel, std::int64_t{1} << 20);
}

// The mean |normalized error| per class (h mod m, w mod m), largest over smallest, for m = 2, 4, 6:
// the largest spread and its m. Only tensors with H and W axes, at least 2m along each and
// kTileClassMin elements per class (fewer make a class's mean too noisy to compare). The mean of
// |error| rather than its RMS: rounding errors normalized by their bound have a heavy tail (a few
// elements near zero with a small bound), which the RMS of a class of a hundred follows.
void tile_spread(const DiagnosisInput& in, const std::vector<std::int64_t>& pos, const std::vector<double>& r,
                 nlohmann::json& out) {
  const auto h = in.axes.find('H'), w = in.axes.find('W');
  if (h == std::string::npos || w == std::string::npos || in.shape.size() != in.axes.size()) return;
  const std::int64_t H = in.shape[h], W = in.shape[w];
  double best = 0;
  int best_m = 0;
  std::vector<std::int64_t> idx(in.shape.size());
  for (int m : {2, 4, 6}) {
    if (H < 2 * m || W < 2 * m || static_cast<std::int64_t>(pos.size()) < kTileClassMin * m * m) continue;
    std::vector<double> sum(static_cast<std::size_t>(m * m), 0);
    std::vector<std::int64_t> count(static_cast<std::size_t>(m * m), 0);
    for (std::size_t k = 0; k < pos.size(); ++k) {
      unravel(pos[k], in.shape, idx.data());
      const auto c = static_cast<std::size_t>((idx[h] % m) * m + idx[w] % m);
      sum[c] += std::fabs(r[k]);
      ++count[c];
    }
    double lo = INFINITY, hi = 0;
    for (std::size_t c = 0; c < sum.size(); ++c) {
      if (count[c] < kTileClassMin) break;
      const double mean = sum[c] / static_cast<double>(count[c]);
      lo = std::min(lo, mean), hi = std::max(hi, mean);
    }
    if (*std::min_element(count.begin(), count.end()) < kTileClassMin) continue;
    if (lo > 0 && hi / lo > best) best = hi / lo, best_m = m;
  }
  if (best_m) out["tile"] = {{"m", best_m}, {"spread", best}};
}

// The rounding bias of the tensor, with the check's allowance: what correct stacks may share, and
// the lean a correct accumulation of same-sign terms may have on its own (accumulation_bias, from
// the scales). nullopt for a role or gradient with no grouping (rounding_bias.hpp, gradient_blocks).
std::optional<RoundingBias> profile_bias(const DiagnosisInput& in, bool bounded) {
  BoundOptions o = bounded ? in.bound->options : BoundOptions{};
  o.dtype = in.logical;
  const double allowed = allowed_bias(o) + (bounded ? accumulation_bias(in.ref, in.bound->scale, o) : 0.0);
  if (in.role == ops::Role::output) return rounding_bias(in.ref, in.run, allowed);
  if (in.role != ops::Role::grad) return std::nullopt;
  const auto w = in.input_shapes.find("weight");
  const std::int64_t kh = w != in.input_shapes.end() && w->second.size() == 4 ? w->second[2] : 0;
  const auto blocks = gradient_blocks(in.tensor, in.axes, kh, in.conv.dilation[0]);
  if (!blocks) return std::nullopt;
  return rounding_bias(in.ref, in.run, in.shape, *blocks, allowed);
}

// With an oracle: whether the run's own error follows each element's own scale or the norm of the
// values around it. A sum of an element's own terms (direct, split) rounds relative to them: its
// error goes with |y_i| + rho_i (the bound's premise). A transform that mixes elements (Winograd's
// tile transforms, an FFT in float32) spreads each rounding over the tile or the tensor: an
// element's error is about u times their norm, whatever its own size (the smoke set's float32
// Winograd F(6x6,3x3) output: exponent 0.05; its direct sums: 1.0). The elements (finite, oracle known) are sorted by s_i = |exact_i| +
// rho_i into 4 quartiles; the RMS error per quartile against the quartile's mean s, fitted in
// log-log, gives the exponent: near 1 local, near 0 the norm. Only when the quartiles' mean scales
// span 2x or more and each holds kScaleQuartileMin elements.
void error_scale(const DiagnosisInput& in, const std::vector<std::int64_t>& pos, nlohmann::json& out) {
  if (!in.bound || in.exact.numel != in.ref.numel || in.bound->scale.numel != in.ref.numel) return;
  std::vector<std::pair<double, double>> se;  // (s_i, error_i^2)
  for (std::int64_t p : pos) {
    const double x = array_element(in.exact, p), b = read_value(in.run, p);
    double rho = static_cast<double>(read_value(in.bound->scale, p)) * in.bound->options.scale_unit;
    if (!std::isfinite(x) || !std::isfinite(b) || !std::isfinite(rho)) continue;
    se.emplace_back(std::fabs(x) + rho, (b - x) * (b - x));
  }
  if (se.size() < 4 * static_cast<std::size_t>(kScaleQuartileMin)) return;
  std::sort(se.begin(), se.end());
  double lx[4], ly[4];
  for (std::size_t q = 0; q < 4; ++q) {
    const std::size_t lo = q * se.size() / 4, hi = (q + 1) * se.size() / 4;
    double ss = 0, ee = 0;
    for (std::size_t i = lo; i < hi; ++i) ss += se[i].first, ee += se[i].second;
    const double n = static_cast<double>(hi - lo);
    if (!(ss > 0) || !(ee > 0)) return;
    lx[q] = std::log(ss / n), ly[q] = 0.5 * std::log(ee / n);
  }
  if (lx[3] - lx[0] < std::log(2.0)) return;
  const double mx = (lx[0] + lx[1] + lx[2] + lx[3]) / 4, my = (ly[0] + ly[1] + ly[2] + ly[3]) / 4;
  double sxx = 0, sxy = 0;
  for (int q = 0; q < 4; ++q) sxx += (lx[q] - mx) * (lx[q] - mx), sxy += (lx[q] - mx) * (ly[q] - my);
  out["scale"] = {{"exponent", sxy / sxx}, {"span", std::exp(lx[3] - lx[0])}};
}

}  // namespace

nlohmann::json failure_profile(const DiagnosisInput& in) {
  nlohmann::json out = nlohmann::json::object();
  const std::int64_t numel = shape_numel(in.shape);
  if (in.run_shape != in.shape || in.ref.numel != numel || in.run.numel != numel || numel < 2) return out;
  const ElementTest gate = gate_test(in);
  const bool bounded = in.bound && in.bound->scale.numel == numel;
  const auto pos = profiled_positions(in, numel);
  std::vector<double> r;  // normalized error (finite elements)
  std::vector<std::int64_t> rpos;
  std::int64_t beyond = 0, within_bound = 0;
  double max_abs = 0, max_over = 0, max_worst = 0;
  std::uint64_t max_ulp = 0;
  for (std::int64_t p : pos) {
    const float a = read_value(in.ref, p), b = read_value(in.run, p);
    if (!std::isfinite(a) || !std::isfinite(b)) continue;
    const double e = static_cast<double>(b) - a, ae = std::fabs(e);
    double unit = dtype_ulp(a, in.logical);  // the normalizer without a bound: one ULP
    if (bounded) {
      double s = static_cast<double>(read_value(in.bound->scale, p)) * in.bound->options.scale_unit;
      if (!std::isfinite(s)) s = 0;
      const double two_sides = two_stack_bound_at(a, s, in.bound->options, p, b);
      unit = two_sides;
      const double worst = std::max(2 * worst_case_bound(a, s, in.bound->options), after_term(in.bound->options, p));
      max_worst = std::max(max_worst, ae / worst);
    }
    const double over = unit > 0 ? ae / unit : (ae > 0 ? INFINITY : 0);
    r.push_back(unit > 0 ? e / unit : 0);
    rpos.push_back(p);
    if (gate.beyond_at(p, a, b)) {
      ++beyond;
      max_abs = std::max(max_abs, ae);
      max_over = std::max(max_over, over);
      max_ulp = std::max(max_ulp, ulp_distance(a, b, in.logical));
      if (bounded && over <= 1) ++within_bound;
    }
  }
  if (r.empty()) return out;
  out["elements"] = r.size();
  out["beyond"] = beyond;
  out["max_abs"] = max_abs;
  out["max_ulp"] = max_ulp;
  if (bounded) {
    out["max_over_bound"] = max_over;
    out["max_over_worst_case"] = max_worst;
    out["within_bound"] = within_bound;
    // Held to its stored dL/dy choice: the worst case above is the noise model's, far wider than
    // what the stored choices allow, so it says nothing about such a failure.
    if (in.bound->options.choice) out["choice"] = true;
  }
  // As the rounding_bias check (compare_bias.cpp): over independent elements for an output, over
  // the blocks of elements that share dL/dy elements for a gradient.
  if (auto bias = profile_bias(in, bounded); bias && !(bias->blocks && bias->dof < 2)) {
    out["bias"] = {{"relative", bias->relative}, {"se", bias->se}, {"z", bias->z}, {"threshold", bias->threshold},
                   {"toward_zero", bias->toward_zero}, {"away_from_zero", bias->away_from_zero}};
    if (bias->blocks) out["bias"]["blocks"] = bias->blocks, out["bias"]["dof"] = bias->dof;
  }
  double ss = 0, mx = 0;
  for (double v : r) ss += v * v, mx = std::max(mx, std::fabs(v));
  const double rms = std::sqrt(ss / static_cast<double>(r.size()));
  // A sum of many independent roundings is near normal: the largest of N such values sits near
  // sqrt(2 ln N) RMS.
  out["tail"] = {{"max_over_rms", rms > 0 ? mx / rms : 0.0},
                 {"normal", std::sqrt(2 * std::log(static_cast<double>(r.size())))}};
  tile_spread(in, rpos, r, out);
  error_scale(in, rpos, out);
  return out;
}

namespace {

// The z from which the profile's bias is named (the Student t threshold of a gradient's blocks).
double bias_threshold(const nlohmann::json& b) {
  return b.contains("threshold") ? b["threshold"].get<double>() : kRoundingBiasZ;
}

// Every element within the gate, the tensor failed on its rounding bias alone (compare_bias.cpp).
std::string bias_only_sentence(const nlohmann::json& p, const std::string& subject) {
  if (!p.contains("bias") || p["bias"]["z"].get<double>() < bias_threshold(p["bias"])) return "";
  const auto& b = p["bias"];
  return fmt::format("no layout mistake explains {}: every element is within its own bound, but over the tensor the "
                     "errors lean {} zero — a relative bias of {:.3g} (+- {:.2g}), {:.0f} standard errors beyond what "
                     "correct stacks may share: a biased rounding such as truncation (round toward zero) in a "
                     "converter, or a scale factor rounded in a narrow type",
                     subject, b["relative"].get<double>() < 0 ? "toward" : "away from", b["relative"].get<double>(),
                     b["se"].get<double>(), b["z"].get<double>());
}

}  // namespace

std::string profile_sentence(const nlohmann::json& p, const std::string& subject) {
  // Only a failure the bound model calls rounding-sized gets this sentence: without scales, or
  // beyond the worst case of rounding in the declared sums, or with no element beyond the gate (a
  // PCC failure), "none of these" is what the numbers support.
  if (!p.contains("max_over_bound")) return "";
  const auto beyond = p["beyond"].get<std::int64_t>();
  if (beyond == 0) return bias_only_sentence(p, subject);
  const double over = p["max_over_bound"].get<double>(), worst = p["max_over_worst_case"].get<double>();
  std::string s;
  if (p["within_bound"].get<std::int64_t>() == beyond)
    s = fmt::format("no layout or precision mistake explains {}: its {} elements beyond the gate are all within the "
                    "error bound of the declared computation (the largest {:.2g}x of it) — the gate is tighter than "
                    "the computation allows",
                    subject, beyond, over);
  else if (p.value("choice", false))
    s = fmt::format("{} is beyond what the declared computation can do: {} elements up to {:.3g}x the bound of its "
                    "legal dL/dy roundings and float32 sums ({} ULP), and no layout or scale hypothesis fits — small "
                    "enough to be a precision difference in the backward pass (an accumulator or dL/dy narrower "
                    "than declared) that the search did not find",
                    subject, beyond, over, p["max_ulp"].get<std::uint64_t>());
  else if (worst <= 1)
    s = fmt::format("no layout or precision mistake explains {}: {} elements up to {:.3g}x their bound ({} ULP), "
                    "within what rounding can do in the declared sums (at most {:.2g}x their worst case) — "
                    "rounding-sized, consistent with another summation algorithm (Winograd, FFT) or a gate "
                    "tighter than the computation allows",
                    subject, beyond, over, p["max_ulp"].get<std::uint64_t>(), worst);
  else
    return "";
  std::vector<std::string> said;
  if (p.contains("bias")) {
    const auto& b = p["bias"];
    if (b["z"].get<double>() >= bias_threshold(b))
      said.push_back(fmt::format("the errors lean {} zero: a relative bias of {:.2g} (+- {:.1g}; {} elements toward "
                                 "zero, {} away), {:.0f} standard errors beyond what correct stacks may share — a "
                                 "biased rounding (truncation) or a scale factor rounded in a narrow type",
                                 b["relative"].get<double>() < 0 ? "toward" : "away from", b["relative"].get<double>(),
                                 b["se"].get<double>(), b["toward_zero"].get<std::int64_t>(),
                                 b["away_from_zero"].get<std::int64_t>(), b["z"].get<double>()));
    else
      said.push_back(fmt::format("no rounding bias (relative {:.2g} +- {:.1g})", b["relative"].get<double>(),
                                 b["se"].get<double>()));
  }
  if (p.contains("tile")) {
    const double spread = p["tile"]["spread"].get<double>();
    const int m = p["tile"]["m"].get<int>();
    if (spread >= kTileSpread)
      said.push_back(fmt::format("the error's mean size per output position modulo {} spreads {:.1f}x, the signature of "
                                 "a tiled transform such as Winograd F({}x{},3x3) (a direct sum's stays near 1x)",
                                 m, spread, m, m));
    else
      said.push_back(fmt::format("no tile pattern (mean error per position modulo {} within {:.2f}x)", m, spread));
  }
  if (p.contains("scale")) {
    const double a = p["scale"]["exponent"].get<double>(), span = p["scale"]["span"].get<double>();
    const char* what = a >= kScaleLocal ? ": it follows each element's own scale, as sums of each element's own "
                                          "terms do (a direct or split sum)"
                       : a <= kScaleNorm ? ": it follows the scale of the values around it, not the element's own — a "
                                           "transform that mixes elements (Winograd's tiles, an FFT)"
                                         : "";
    said.push_back(fmt::format("against the oracle the run's error goes as (|y| + rho)^{:.2f} over quartiles of "
                               "|y| + rho spanning {:.1f}x{}",
                               a, span, what));
  }
  const double tail = p["tail"]["max_over_rms"].get<double>(), normal = p["tail"]["normal"].get<double>();
  said.push_back(fmt::format("largest error {:.1f}x the RMS ({:.1f} for a normal sample of this size)", tail, normal));
  s += ". Over the tensor: ";
  for (std::size_t i = 0; i < said.size(); ++i) s += (i ? "; " : "") + said[i];
  return s + ".";
}

}  // namespace validate::compare::detail
