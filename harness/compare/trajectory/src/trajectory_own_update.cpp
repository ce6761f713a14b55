// The run's first two SGD updates against its own earlier parameters and gradients
// (trajectory_check.hpp, check_own_update): an optimizer check that no gradient noise blurs, and,
// when it fails, the settings the run's update actually used.
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "validate/diagnosis/named_diagnosis.hpp"
#include "trajectory_files.hpp"
#include "validate/compare/trajectory_check.hpp"
#include "validate/metrics/ulp.hpp"
#include "validate/train/sgd.hpp"
#include "validate/train/tensor_names.hpp"

namespace validate::compare {

namespace {

using detail::CaseFiles;

// Half an ULP of the case dtype, relative: the most a gradient changes when a stack hands its
// optimizer the float32 gradient and writes the checkpoint rounded to the case dtype (legitimate).
double gradient_rounding(DType d) {
  switch (d) {
    case DType::bfloat16: return std::ldexp(1.0, -8);
    case DType::float16: return std::ldexp(1.0, -11);
    default: return 0;
  }
}

// The optimizer_settings hypothesis on `param`, its sentence parts to be filled in.
Hypothesis optimizer_settings(const std::string& param, nlohmann::json params) {
  Hypothesis h;
  h.code = "optimizer_settings";
  h.tensor = param;
  h.side = "numeric";
  h.family = "optimizer";
  h.params = std::move(params);
  h.params["parameter"] = param;
  return h;
}

// The gradients_accumulated hypothesis (no zero_grad) on `tensor`, with its own description and
// the end of its cause: named from a gradient checkpoint or from the second update.
Hypothesis gradients_accumulated(const std::string& param, const std::string& tensor, nlohmann::json params,
                                 std::string description, const std::string& cause_tail) {
  Hypothesis h = optimizer_settings(param, std::move(params));
  h.params["variant"] = "gradients_accumulated";
  h.code = "gradients_accumulated";
  h.tensor = tensor;
  h.description = std::move(description);
  h.cause = "the gradient buffers are not zeroed between steps (a missing optimizer.zero_grad(): each backward adds "
            "into .grad" + cause_tail;
  h.fix = "zero the gradients before each step's backward (optimizer.zero_grad(), or reset the accumulator to 0)";
  return h;
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

std::optional<CheckpointCheck> check_own_update(const CheckpointDiagnosisInput& in) {
  if (!in.ref || !in.ref->c.train) return std::nullopt;
  const cases::Case& c = in.ref->c;
  const train::TrainConfig& tc = *c.train;
  if (tc.optimizer != train::Optimizer::sgd) return std::nullopt;
  const auto name = train::parse_checkpoint_tensor(in.tensor);
  if (!name || (name->step != 1 && name->step != 2) || name->tensor.rfind("grad_", 0) == 0) return std::nullopt;
  const std::int64_t k = name->step;
  const std::string param = name->tensor;
  const auto all = c.tensors(in.op);
  const cases::TensorInfo* info = detail::find_tensor(all, in.tensor);
  if (!info) return std::nullopt;
  const CaseFiles files{in};
  // The run's own parameters and gradients of the steps before k.
  std::vector<Tensor> ws, gs;
  for (std::int64_t j = 0; j < k; ++j) {
    const std::string wn = train::checkpoint_tensor(j, param), gn = train::checkpoint_tensor(j, "grad_" + param);
    if (!detail::produced(in.run, wn) || !detail::produced(in.run, gn)) return std::nullopt;
    auto w = files.run(wn, info->shape), g = files.run(gn, info->shape);
    if (!w || !g) return std::nullopt;
    ws.push_back(std::move(*w));
    gs.push_back(std::move(*g));
  }
  auto wk = files.run(in.tensor, info->shape);
  if (!wk) return std::nullopt;
  const std::size_t n = static_cast<std::size_t>(wk->numel());
  const double u = gradient_rounding(c.dtype);
  // The case's updates in float32 (train::sgd_step, which torch.optim.SGD's agrees with within an
  // ULP) replayed on the run's own parameters and gradients: step j starts from the run's w_j, so
  // only the last update is judged, with the momentum buffer the earlier ones built. Replayed again
  // with every gradient moved by the case dtype's rounding either way, for the tolerance.
  using StepFn = void (*)(float*, const float*, std::size_t, train::SgdState<float>&, const train::TrainConfig&);
  // `scaled`: the step whose gradient is multiplied by `scale` (-1: none). `accumulated`: each
  // step applies the sum of the gradients so far (the buffers never zeroed), in float32.
  auto replay = [&](StepFn fn, std::int64_t scaled = -1, double scale = 1, bool accumulated = false) {
    train::SgdState<float> state;
    std::vector<float> p(n), g(n), sum(n, 0.0f);
    for (std::int64_t j = 0; j < k; ++j) {
      const double f = j == scaled ? scale : 1.0;
      for (std::size_t i = 0; i < n; ++i) {
        p[i] = static_cast<float>(ws[static_cast<std::size_t>(j)].get(static_cast<std::int64_t>(i)));
        g[i] = static_cast<float>(gs[static_cast<std::size_t>(j)].get(static_cast<std::int64_t>(i)) * f);
        if (accumulated) g[i] = sum[i] = sum[i] + g[i];
      }
      fn(p.data(), g.data(), n, state, tc);
    }
    return p;
  };
  // Per element: 4 float32 ULP of the largest operand, plus each gradient's rounding moved alone
  // either way (the gradients round independently, so their effects add).
  const Tensor& wprev = ws.back();
  auto tolerance = [&](StepFn fn, const std::vector<float>& base, bool accumulated = false) {
    std::vector<double> t(n);
    for (std::size_t i = 0; i < n; ++i) {
      const double wi = wprev.get(static_cast<std::int64_t>(i)), ei = base[i];
      t[i] = 4 * float32_ulp(std::max({std::fabs(wi), std::fabs(ei), std::fabs(wi - ei)}));
    }
    if (u > 0)
      for (std::int64_t j = 0; j < k; ++j) {
        const std::vector<float> up = replay(fn, j, 1 + u, accumulated), down = replay(fn, j, 1 - u, accumulated);
        for (std::size_t i = 0; i < n; ++i)
          t[i] += std::max(std::fabs(static_cast<double>(up[i]) - base[i]), std::fabs(static_cast<double>(down[i]) - base[i]));
      }
    return t;
  };
  const StepFn torch_sgd = &train::sgd_step<float>;
  const std::vector<float> e = replay(torch_sgd);
  const std::vector<double> tol = tolerance(torch_sgd, e);
  std::int64_t beyond = 0, worst = -1;
  double worst_ratio = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double ei = e[i];
    const double err = std::fabs(wk->get(static_cast<std::int64_t>(i)) - ei);
    const double ratio = std::isnan(err) ? std::numeric_limits<double>::infinity() : err / tol[i];
    if (ratio > 1) ++beyond;
    if (worst < 0 || ratio > worst_ratio) worst = static_cast<std::int64_t>(i), worst_ratio = ratio;
  }
  CheckpointCheck out;
  out.check = Check{k == 1 ? "own_first_update_beyond_tolerance" : "own_second_update_beyond_tolerance",
                    static_cast<double>(beyond), 0, true, beyond == 0};
  if (beyond == 0) return out;
  const std::string w0_name = train::checkpoint_tensor(0, param), g0_name = train::checkpoint_tensor(0, "grad_" + param);
  const std::string from =
      k == 1 ? fmt::format("{} and {}", w0_name, g0_name)
             : fmt::format("{} and {}, with the momentum buffer of {} and {}", train::checkpoint_tensor(1, param),
                           train::checkpoint_tensor(1, "grad_" + param), w0_name, g0_name);
  const std::string rounding =
      u > 0 ? fmt::format(" + the {} rounding of the gradient", dtype_name(c.dtype)) : std::string();
  out.reason = fmt::format(
      "{} of {} elements of {} are not the case's SGD step from the run's own {} (tolerance 4 float32 ULP{}); worst at "
      "{}: expected {:.9g}, run {:.9g} — the optimizer differs from the case's",
      beyond, n, in.tensor, from, rounding, format_coords(worst, info->shape, info->canonical_axes),
      e[static_cast<std::size_t>(worst)], wk->get(worst));

  if (k == 2) {
    // The second update is the first that reads state the earlier steps left: the momentum buffer
    // and, in a loop that never zeroes them, the gradient buffers. Each classic way of getting that
    // state wrong gives the same first update and a different second one; one is named when the
    // run's step 2 is that variant replayed from its own steps 0 and 1 on every element (within
    // twice the tolerance of the case's own replay).
    auto fits = [&](StepFn fn, bool accumulated) {
      const std::vector<float> v = replay(fn, -1, 1, accumulated);
      const std::vector<double> vt = tolerance(fn, v, accumulated);
      for (std::size_t i = 0; i < n; ++i)
        if (!(std::fabs(wk->get(static_cast<std::int64_t>(i)) - v[i]) <= 2 * vt[i])) return false;
      return true;
    };
    // Weight decay added after the momentum, not to the gradient before it (the trap sgd.hpp names).
    const StepFn decay_after = [](float* p, const float* g, std::size_t m, train::SgdState<float>& st,
                                  const train::TrainConfig& cfg) {
      train::TrainConfig no_decay = cfg;
      no_decay.weight_decay = 0;
      std::vector<float> before(p, p + m);
      train::sgd_step(p, g, m, st, no_decay);
      const float lr = static_cast<float>(cfg.lr), wd = static_cast<float>(cfg.weight_decay);
      for (std::size_t i = 0; i < m; ++i) p[i] = static_cast<float>(p[i] - static_cast<float>(lr * static_cast<float>(wd * before[i])));
    };
    // No momentum (momentum=0 where the case has one, or the buffer rebuilt every step): each
    // update is lr (g + wd w) alone.
    const StepFn no_momentum = [](float* p, const float* g, std::size_t m, train::SgdState<float>& st,
                                  const train::TrainConfig& cfg) {
      train::TrainConfig plain = cfg;
      plain.momentum = 0;
      plain.dampening = 0;
      plain.nesterov = false;
      train::sgd_step(p, g, m, st, plain);
    };
    Hypothesis h;
    if (tc.momentum != 0 && tc.weight_decay != 0 && fits(decay_after, false)) {
      h = optimizer_settings(param, {{"variant", "weight_decay_after_momentum"}});
      h.description = fmt::format("the second update of {} applies the weight decay after the momentum: {} is the "
                                  "case's SGD step with weight_decay·{} added to the update instead of to the gradient",
                                  param, in.tensor, param);
      h.cause = "torch.optim.SGD adds weight_decay·p to the gradient before the momentum buffer, so the decay is "
                "accumulated (1/(1 − momentum) times larger); added after it, the first update is the same and the "
                "trajectories part from step 2";
      h.fix = "add weight_decay·p to the gradient before updating the momentum buffer";
    } else if (tc.momentum != 0 && fits(no_momentum, false)) {
      h = optimizer_settings(param, {{"variant", "momentum_missing"}, {"momentum_case", tc.momentum}});
      h.description = fmt::format("momentum missing: the second update of {} is lr·(gradient + weight_decay·{}) alone, "
                                  "the case's SGD step with momentum 0 instead of {} ({} from the run's own {} and {})",
                                  param, param, tc.momentum, in.tensor, train::checkpoint_tensor(1, param),
                                  train::checkpoint_tensor(1, "grad_" + param));
      h.cause = "the optimizer is built without the case's momentum (SGD's momentum defaults to 0), or its momentum "
                "buffer is not kept between steps; the first update of SGD with momentum equals the plain one, so "
                "the trajectories part from step 2";
      h.fix = fmt::format("use momentum {} (dampening {}{}) and keep the momentum buffer from one step to the next",
                          tc.momentum, tc.dampening, tc.nesterov ? ", Nesterov" : "");
    } else if (fits(torch_sgd, true)) {
      h = gradients_accumulated(
          param, param, nlohmann::json::object(),
          fmt::format("gradients accumulated across steps: the second update of {} applies {} + {} (the gradients "
                      "the run wrote), the case's SGD step on their sum",
                      param, train::checkpoint_tensor(1, "grad_" + param), g0_name),
          "), while the gradients written out are each step's own");
    } else {
      return out;
    }
    out.diagnosis = detail::named_on_every_element(std::move(h), static_cast<std::int64_t>(n));
    return out;
  }

  // Which settings the run's update used: w0 - w1 = a g + b w0, against the case's
  // a = lr (1 + momentum if Nesterov), b = a weight_decay. Named only when the fit explains every
  // element within twice its tolerance (a layout mistake, a lost update, a rounded master do not fit).
  std::vector<double> dv(n), gv(n), wv(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto at = static_cast<std::int64_t>(i);
    dv[i] = ws[0].get(at) - wk->get(at);
    gv[i] = gs[0].get(at);
    wv[i] = ws[0].get(at);
  }
  const Fit f = fit_update(dv, gv, wv);
  if (!f.ok) return out;
  for (std::size_t i = 0; i < n; ++i)
    if (!(std::fabs(dv[i] - f.a * gv[i] - f.b * wv[i]) <= 2 * tol[i])) return out;
  const double nesterov_factor = tc.nesterov ? 1 + tc.momentum : 1.0;
  const double a_case = tc.lr * nesterov_factor, ratio = f.a / a_case;
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
      named.push_back(fmt::format("learning rate {:.6g} instead of {}", f.a / nesterov_factor, tc.lr));
  }
  // Within 5% of the case's, or 1e-5 absolute: the fit's b carries the float32 rounding of the
  // stored weights (~6e-8 |w|), which reads as a weight decay of ~1e-6 at lr 0.1 on a case with none.
  if (!(std::fabs(wd_run - tc.weight_decay) <= std::max(0.05 * tc.weight_decay, 1e-5))) {
    if (tc.weight_decay != 0 && std::fabs(wd_run) <= 0.05 * tc.weight_decay)
      named.push_back(fmt::format("weight decay missing (the case's is {})", tc.weight_decay));
    else
      named.push_back(fmt::format("weight decay {:.3g} instead of {}", wd_run, tc.weight_decay));
  }
  if (named.empty()) return out;
  std::string what;
  for (const auto& s : named) what += (what.empty() ? "" : "; ") + s;
  Hypothesis h = optimizer_settings(param, {{"lr_case", tc.lr},
                                             {"lr_run", f.a / nesterov_factor},
                                             {"weight_decay_case", tc.weight_decay},
                                             {"weight_decay_run", wd_run},
                                             {"update_ratio", ratio}});
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

std::optional<Diagnosis> diagnose_accumulated_gradient(const CheckpointDiagnosisInput& in) {
  if (!in.ref || !in.ref->c.train) return std::nullopt;
  const cases::Case& c = in.ref->c;
  const auto name = train::parse_checkpoint_tensor(in.tensor);
  if (!name || name->step < 1 || name->tensor.rfind("grad_", 0) != 0) return std::nullopt;
  const std::string prev = train::checkpoint_tensor(name->step - 1, name->tensor);
  if (!detail::produced(in.run, prev)) return std::nullopt;
  const auto all = c.tensors(in.op);
  const cases::TensorInfo* info = detail::find_tensor(all, in.tensor);
  if (!info) return std::nullopt;
  const CaseFiles files{in};
  auto ref_k = files.ref(in.tensor, info->shape), run_k = files.run(in.tensor, info->shape),
       run_p = files.run(prev, info->shape);
  if (!ref_k || !run_k || !run_p) return std::nullopt;
  const std::int64_t n = ref_k->numel();
  double max_ref = 0, max_prev = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    max_ref = std::max(max_ref, std::fabs(ref_k->get(i)));
    max_prev = std::max(max_prev, std::fabs(run_p->get(i)));
  }
  const double rtol = std::max(in.gates.rtol.value_or(0), 1e-3);
  const double floor = std::max(in.gates.near_zero * max_ref, 1e-30);
  // Nothing to tell apart when the previous gradient is below the tolerance itself.
  if (!(max_prev > rtol * std::max(max_ref, floor))) return std::nullopt;
  const double u = c.dtype == DType::float32 ? std::ldexp(1.0, -24) : gradient_rounding(c.dtype);
  for (std::int64_t i = 0; i < n; ++i) {
    const double r = ref_k->get(i), a = run_k->get(i), p = run_p->get(i);
    const double tol = rtol * std::max(std::fabs(r), floor) + u * (std::fabs(a) + std::fabs(p)) +
                       4 * float32_ulp(std::max(std::fabs(a), std::fabs(p)));
    if (!(std::fabs((a - p) - r) <= tol)) return std::nullopt;
  }
  const std::string param = name->tensor.substr(5);
  Hypothesis h = gradients_accumulated(
      param, name->tensor, {{"step", name->step}},
      fmt::format("gradients accumulated across steps: {} is the reference's step-{} gradient plus the run's {} "
                  "(every element of {})",
                  in.tensor, name->step, prev, n),
      ", so every update applies the sum of all gradients so far)");
  return detail::named_on_every_element(std::move(h), n);
}

}  // namespace validate::compare
