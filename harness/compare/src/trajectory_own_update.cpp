// The run's first SGD update against its own step-0 parameter and gradient (trajectory_check.hpp,
// check_own_first_update): an optimizer check that no gradient noise blurs, and, when it fails,
// the learning rate and weight decay the run's update actually used.
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "named_diagnosis.hpp"
#include "trajectory_files.hpp"
#include "validate/compare/trajectory_check.hpp"
#include "validate/train/sgd.hpp"
#include "validate/train/tensor_names.hpp"

namespace validate::compare {

namespace {

using detail::CaseFiles;

double ulp32(double x) {
  const float f = static_cast<float>(std::fabs(x));
  return static_cast<double>(std::nextafter(f, std::numeric_limits<float>::infinity())) - static_cast<double>(f);
}

// Half an ULP of the case dtype, relative: the most a gradient changes when a stack hands its
// optimizer the float32 gradient and writes the checkpoint rounded to the case dtype (legitimate).
double gradient_rounding(DType d) {
  switch (d) {
    case DType::bfloat16: return std::ldexp(1.0, -8);
    case DType::float16: return std::ldexp(1.0, -11);
    default: return 0;
  }
}

struct Fit {
  double a = 0, b = 0;  // w0 - w1 = a g + b w0
  bool ok = false;
};

// Least squares of the run's update on the gradient and the parameter.
Fit fit_update(const std::vector<double>& d, const std::vector<double>& g, const std::vector<double>& w) {
  double gg = 0, gw = 0, ww = 0, gd = 0, wd = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    gg += g[i] * g[i];
    gw += g[i] * w[i];
    ww += w[i] * w[i];
    gd += g[i] * d[i];
    wd += w[i] * d[i];
  }
  const double det = gg * ww - gw * gw;
  Fit f;
  if (!(gg > 0) || !(ww > 0) || !(det > 1e-12 * gg * ww)) return f;  // g and w (nearly) parallel
  f.a = (gd * ww - wd * gw) / det;
  f.b = (wd * gg - gd * gw) / det;
  f.ok = std::isfinite(f.a) && std::isfinite(f.b);
  return f;
}

}  // namespace

std::optional<CheckpointCheck> check_own_first_update(const CheckpointDiagnosisInput& in) {
  if (!in.ref || !in.ref->c.train) return std::nullopt;
  const cases::Case& c = in.ref->c;
  const train::TrainConfig& tc = *c.train;
  if (tc.optimizer != train::Optimizer::sgd) return std::nullopt;
  const auto name = train::parse_checkpoint_tensor(in.tensor);
  if (!name || name->step != 1 || name->tensor.rfind("grad_", 0) == 0) return std::nullopt;
  const std::string param = name->tensor;
  const std::string w0_name = train::checkpoint_tensor(0, param), g0_name = train::checkpoint_tensor(0, "grad_" + param);
  if (!detail::produced(in.run, w0_name) || !detail::produced(in.run, g0_name)) return std::nullopt;
  const auto all = c.tensors(in.op);
  const cases::TensorInfo* info = detail::find_tensor(all, in.tensor);
  if (!info) return std::nullopt;
  const CaseFiles files{in};
  auto w1 = files.run(in.tensor, info->shape), w0 = files.run(w0_name, info->shape), g0 = files.run(g0_name, info->shape);
  if (!w1 || !w0 || !g0) return std::nullopt;
  const std::size_t n = static_cast<std::size_t>(w1->numel());
  const double u = gradient_rounding(c.dtype);
  // The case's update in float32 (train::sgd_step, which torch.optim.SGD's agrees with within an
  // ULP), from the run's own w0 and g0, and with g0 moved by the case dtype's rounding either way.
  std::vector<float> p(n), e(n), e_up(n), e_down(n), g(n), g_up(n), g_down(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::int64_t>(i);
    p[i] = static_cast<float>(w0->get(k));
    g[i] = static_cast<float>(g0->get(k));
    g_up[i] = static_cast<float>(g0->get(k) * (1 + u));
    g_down[i] = static_cast<float>(g0->get(k) * (1 - u));
  }
  auto step = [&](const std::vector<float>& grad, std::vector<float>& out) {
    out = p;
    train::SgdState<float> fresh;
    train::sgd_step(out.data(), grad.data(), n, fresh, tc);
  };
  step(g, e);
  step(g_up, e_up);
  step(g_down, e_down);
  std::int64_t beyond = 0, worst = -1;
  double worst_ratio = 0;
  std::vector<double> tol(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double wi = w0->get(static_cast<std::int64_t>(i)), ei = e[i];
    tol[i] = std::max(std::fabs(static_cast<double>(e_up[i]) - ei), std::fabs(static_cast<double>(e_down[i]) - ei)) +
             4 * ulp32(std::max({std::fabs(wi), std::fabs(ei), std::fabs(wi - ei)}));
    const double err = std::fabs(w1->get(static_cast<std::int64_t>(i)) - ei);
    const double ratio = std::isnan(err) ? std::numeric_limits<double>::infinity() : err / tol[i];
    if (ratio > 1) ++beyond;
    if (worst < 0 || ratio > worst_ratio) worst = static_cast<std::int64_t>(i), worst_ratio = ratio;
  }
  CheckpointCheck out;
  out.check = Check{"own_first_update_beyond_tolerance", static_cast<double>(beyond), 0, true, beyond == 0};
  if (beyond == 0) return out;
  const std::string rounding =
      u > 0 ? fmt::format(" + the {} rounding of the gradient", dtype_name(c.dtype)) : std::string();
  out.reason = fmt::format(
      "{} of {} elements of {} are not the case's SGD step from the run's own {} and {} (tolerance 4 float32 ULP{}); "
      "worst at {}: expected {:.9g}, run {:.9g} — the optimizer differs from the case's",
      beyond, n, in.tensor, w0_name, g0_name, rounding, format_coords(worst, info->shape, info->canonical_axes), e[static_cast<std::size_t>(worst)],
      w1->get(worst));

  // Which settings the run's update used: w0 - w1 = a g + b w0, against the case's
  // a = lr (1 + momentum if Nesterov), b = a weight_decay. Named only when the fit explains every
  // element within twice its tolerance (a layout mistake, a lost update, a rounded master do not fit).
  std::vector<double> dv(n), gv(n), wv(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::int64_t>(i);
    dv[i] = w0->get(k) - w1->get(k);
    gv[i] = g0->get(k);
    wv[i] = w0->get(k);
  }
  const Fit f = fit_update(dv, gv, wv);
  if (!f.ok) return out;
  for (std::size_t i = 0; i < n; ++i)
    if (!(std::fabs(dv[i] - f.a * gv[i] - f.b * wv[i]) <= 2 * tol[i])) return out;
  const double k = tc.nesterov ? 1 + tc.momentum : 1.0;
  const double a_case = tc.lr * k, ratio = f.a / a_case;
  const double wd_run = f.a != 0 ? f.b / f.a : 0;
  std::vector<std::string> named;
  auto near = [](double x, double y) { return std::fabs(x - y) <= 1e-3 * std::max(std::fabs(y), 1e-12); };
  if (!near(ratio, 1)) {
    if (tc.momentum != 0 && tc.dampening != 0 && near(ratio, 1 - tc.dampening))
      named.push_back(fmt::format("dampening {} applied to the first step (torch.optim.SGD starts the momentum "
                                  "buffer as the undamped gradient)",
                                  tc.dampening));
    else if (tc.momentum != 0 && !tc.nesterov && near(ratio, 1 + tc.momentum))
      named.push_back("Nesterov momentum applied (the case has none)");
    else if (tc.nesterov && near(ratio, 1 / (1 + tc.momentum)))
      named.push_back("Nesterov momentum missing");
    else
      named.push_back(fmt::format("learning rate {:.6g} instead of {}", f.a / k, tc.lr));
  }
  if (!(std::fabs(wd_run - tc.weight_decay) <= 0.05 * std::max(tc.weight_decay, 1e-6))) {
    if (tc.weight_decay != 0 && std::fabs(wd_run) <= 0.05 * tc.weight_decay)
      named.push_back(fmt::format("weight decay missing (the case's is {})", tc.weight_decay));
    else
      named.push_back(fmt::format("weight decay {:.3g} instead of {}", wd_run, tc.weight_decay));
  }
  if (named.empty()) return out;
  std::string what;
  for (const auto& s : named) what += (what.empty() ? "" : "; ") + s;
  Hypothesis h;
  h.code = "optimizer_settings";
  h.tensor = param;
  h.side = "numeric";
  h.family = "optimizer";
  h.params = {{"parameter", param},         {"lr_case", tc.lr},          {"lr_run", f.a / k},
              {"weight_decay_case", tc.weight_decay}, {"weight_decay_run", wd_run}, {"update_ratio", ratio}};
  // "0.05·step0_grad_weight + 5e-05·step0_weight", the second sign written out.
  auto form = [&](double a, double b) {
    return fmt::format("{:.6g}·{} {} {:.3g}·{}", a, g0_name, b < 0 ? "−" : "+", std::fabs(b), w0_name);
  };
  h.description = fmt::format("the first update of {} is an SGD step with other settings: {} ({} − {} = {} fits every "
                              "element; the case's is {})",
                              param, what, w0_name, in.tensor, form(f.a, f.b), form(a_case, a_case * tc.weight_decay));
  h.cause = "the optimizer is configured or applied otherwise than the case's schedule (torch.optim.SGD: weight decay "
            "added to the gradient, the momentum buffer starting as that gradient)";
  h.fix = fmt::format("train with lr {}, momentum {}, dampening {}, weight_decay {}{} as torch.optim.SGD applies them",
                      tc.lr, tc.momentum, tc.dampening, tc.weight_decay, tc.nesterov ? ", Nesterov" : "");
  out.diagnosis = detail::named_on_every_element(std::move(h), static_cast<std::int64_t>(n));
  return out;
}

}  // namespace validate::compare
