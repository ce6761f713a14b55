// The run's first two SGD updates against its own earlier parameters and gradients
// (trajectory_check.hpp, check_own_update): an optimizer check that no gradient noise blurs, and,
// when it fails, the settings the run's update actually used.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "validate/diagnosis/named_diagnosis.hpp"
#include "sgd_settings.hpp"
#include "trajectory_files.hpp"
#include "validate/train/trajectory_check.hpp"
#include "validate/metrics/ulp.hpp"
#include "validate/train/sgd.hpp"
#include "validate/train/tensor_names.hpp"

namespace validate::compare {

namespace {

using detail::CaseFiles;
using detail::Candidate;
using detail::LinearFit;
using detail::OwnSteps;
using detail::UpdateCoefficients;
using detail::named_on_every_element;
using detail::fit_first_update;
using detail::fit_second_update;
using detail::fit_two;
using detail::first_update_candidates;
using detail::predicted_coefficients;
using detail::read_settings;
using detail::same_coefficients;
using detail::setting_differences;
using detail::weight_decay_difference;

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

// The case's SGD updates replayed on the run's own parameters and gradients of the steps before k
// (train::sgd_step in float32, which torch.optim.SGD's agrees with within an ULP): step j starts
// from the run's w_j, so only the last update is judged, with the momentum buffer the earlier ones
// built. Replayed again with every gradient moved by the case dtype's rounding either way, for the
// tolerance.
using StepFn = void (*)(float*, const float*, std::size_t, train::SgdState<float>&, const train::TrainConfig&);
struct OwnReplay {
  const std::vector<Tensor>& ws;
  const std::vector<Tensor>& gs;
  const train::TrainConfig& tc;
  std::size_t n = 0;
  double u = 0;  // gradient_rounding of the case dtype

  // `scaled`: the step whose gradient is multiplied by `scale` (-1: none). `accumulated`: each
  // step applies the sum of the gradients so far (the buffers never zeroed), in float32.
  std::vector<float> run(StepFn fn, std::int64_t scaled = -1, double scale = 1, bool accumulated = false) const {
    train::SgdState<float> state;
    std::vector<float> p(n), g(n), sum(n, 0.0f);
    for (std::size_t j = 0; j < ws.size(); ++j) {
      const double f = static_cast<std::int64_t>(j) == scaled ? scale : 1.0;
      for (std::size_t i = 0; i < n; ++i) {
        p[i] = static_cast<float>(ws[j].get(static_cast<std::int64_t>(i)));
        g[i] = static_cast<float>(gs[j].get(static_cast<std::int64_t>(i)) * f);
        if (accumulated) g[i] = sum[i] = sum[i] + g[i];
      }
      fn(p.data(), g.data(), n, state, tc);
    }
    return p;
  }
  // Per element: 4 float32 ULP of the largest operand, plus each gradient's rounding moved alone
  // either way (the gradients round independently, so their effects add).
  std::vector<double> tolerance(StepFn fn, const std::vector<float>& base, bool accumulated = false) const {
    const Tensor& wprev = ws.back();
    std::vector<double> t(n);
    for (std::size_t i = 0; i < n; ++i) {
      const double wi = wprev.get(static_cast<std::int64_t>(i)), ei = base[i];
      t[i] = 4 * float32_ulp(std::max({std::fabs(wi), std::fabs(ei), std::fabs(wi - ei)}));
    }
    if (u > 0)
      for (std::size_t j = 0; j < ws.size(); ++j) {
        const auto sj = static_cast<std::int64_t>(j);
        const std::vector<float> up = run(fn, sj, 1 + u, accumulated), down = run(fn, sj, 1 - u, accumulated);
        for (std::size_t i = 0; i < n; ++i)
          t[i] += std::max(std::fabs(static_cast<double>(up[i]) - base[i]), std::fabs(static_cast<double>(down[i]) - base[i]));
      }
    return t;
  }
  // The run's step k is `fn` replayed, on every element within twice the tolerance.
  bool fits(StepFn fn, bool accumulated, const Tensor& wk) const {
    const std::vector<float> v = run(fn, -1, 1, accumulated);
    const std::vector<double> vt = tolerance(fn, v, accumulated);
    for (std::size_t i = 0; i < n; ++i)
      if (!(std::fabs(wk.get(static_cast<std::int64_t>(i)) - v[i]) <= 2 * vt[i])) return false;
    return true;
  }
};

std::vector<double> tensor_values(const Tensor& t) {
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = t.get(static_cast<std::int64_t>(i));
  return v;
}

// The names of one parameter's checkpoint tensors.
struct ParamNames {
  std::string param;
  std::string w(std::int64_t k) const { return train::checkpoint_tensor(k, param); }
  std::string g(std::int64_t k) const { return train::checkpoint_tensor(k, "grad_" + param); }
};

// Weight decay added after the momentum, not to the gradient before it (the trap sgd.hpp names).
void decay_after_step(float* p, const float* g, std::size_t m, train::SgdState<float>& st, const train::TrainConfig& cfg) {
  train::TrainConfig no_decay = cfg;
  no_decay.weight_decay = 0;
  std::vector<float> before(p, p + m);
  train::sgd_step(p, g, m, st, no_decay);
  const float lr = static_cast<float>(cfg.lr), wd = static_cast<float>(cfg.weight_decay);
  for (std::size_t i = 0; i < m; ++i) p[i] = static_cast<float>(p[i] - static_cast<float>(lr * static_cast<float>(wd * before[i])));
}

// No momentum (momentum=0 where the case has one, or the buffer rebuilt every step): each update is
// lr (g + wd w) alone.
void no_momentum_step(float* p, const float* g, std::size_t m, train::SgdState<float>& st, const train::TrainConfig& cfg) {
  train::TrainConfig plain = cfg;
  plain.momentum = 0;
  plain.dampening = 0;
  plain.nesterov = false;
  train::sgd_step(p, g, m, st, plain);
}

// The second update is the first that reads state the earlier steps left: the momentum buffer and,
// in a loop that never zeroes them, the gradient buffers. Each classic way of getting that state
// wrong gives the same first update and a different second one; one is named when the run's step 2
// is that variant replayed from its own steps 0 and 1 on every element.
std::optional<Hypothesis> second_update_variant(const OwnReplay& replay, const Tensor& wk, const ParamNames& p,
                                                const train::TrainConfig& tc) {
  Hypothesis h;
  if (tc.momentum != 0 && tc.weight_decay != 0 && replay.fits(&decay_after_step, false, wk)) {
    h = optimizer_settings(p.param, {{"variant", "weight_decay_after_momentum"}});
    h.description = fmt::format("the second update of {} applies the weight decay after the momentum: {} is the "
                                "case's SGD step with weight_decay·{} added to the update instead of to the gradient",
                                p.param, p.w(2), p.param);
    h.cause = "torch.optim.SGD adds weight_decay·p to the gradient before the momentum buffer, so the decay is "
              "accumulated (1/(1 − momentum) times larger); added after it, the first update is the same and the "
              "trajectories part from step 2";
    h.fix = "add weight_decay·p to the gradient before updating the momentum buffer";
  } else if (tc.momentum != 0 && replay.fits(&no_momentum_step, false, wk)) {
    h = optimizer_settings(p.param, {{"variant", "momentum_missing"}, {"momentum_case", tc.momentum}});
    h.description = fmt::format("momentum missing: the second update of {} is lr·(gradient + weight_decay·{}) alone, "
                                "the case's SGD step with momentum 0 instead of {} ({} from the run's own {} and {})",
                                p.param, p.param, tc.momentum, p.w(2), p.w(1), p.g(1));
    h.cause = "the optimizer is built without the case's momentum (SGD's momentum defaults to 0), or its momentum "
              "buffer is not kept between steps; the first update of SGD with momentum equals the plain one, so "
              "the trajectories part from step 2";
    h.fix = fmt::format("use momentum {} (dampening {}{}) and keep the momentum buffer from one step to the next",
                        tc.momentum, tc.dampening, tc.nesterov ? ", Nesterov" : "");
  } else if (replay.fits(&train::sgd_step<float>, true, wk)) {
    h = gradients_accumulated(
        p.param, p.param, nlohmann::json::object(),
        fmt::format("gradients accumulated across steps: the second update of {} applies {} + {} (the gradients "
                    "the run wrote), the case's SGD step on their sum",
                    p.param, p.g(1), p.g(0)),
        "), while the gradients written out are each step's own");
  } else {
    return std::nullopt;
  }
  return h;
}

std::string settings_fix(const train::TrainConfig& tc) {
  return fmt::format("train with lr {}, momentum {}, dampening {}, weight_decay {}{} as torch.optim.SGD applies them",
                     tc.lr, tc.momentum, tc.dampening, tc.weight_decay, tc.nesterov ? ", Nesterov" : "");
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string s;
  for (const auto& x : parts) s += (s.empty() ? "" : sep) + x;
  return s;
}

// "A or B", "A, B or C".
std::string join_or(const std::vector<std::string>& parts) {
  std::string s;
  for (std::size_t i = 0; i < parts.size(); ++i) s += (i == 0 ? "" : i + 1 == parts.size() ? " or " : ", ") + parts[i];
  return s;
}

// The weight decay the run's first update shows, or the case's when they agree (the fit reads the
// float32 rounding of the weights as a decay of ~1e-8: not worth writing into a formula).
double shown_weight_decay(double wd_run, const train::TrainConfig& tc) {
  return weight_decay_difference(wd_run, tc) ? wd_run : tc.weight_decay;
}

// "0.045·(step1_grad_weight + 0.001·step1_weight) + 0.025·(step0_grad_weight + 0.001·step0_weight)"
std::string second_form(double alpha, double beta, double wd, const ParamNames& p) {
  auto term = [&](double c, std::int64_t k) {
    return wd == 0 ? fmt::format("{:.6g}·{}", c, p.g(k)) : fmt::format("{:.6g}·({} + {:.3g}·{})", c, p.g(k), wd, p.w(k));
  };
  return term(alpha, 1) + " + " + term(beta, 0);
}

// Step 2 read as settings (sgd_settings.hpp): the run's own steps 0 to 2 fit the SGD form with a
// learning rate, momentum, dampening and weight decay of their own, each told apart there.
std::optional<Hypothesis> second_update_settings(const OwnSteps& st, const ParamNames& p, const train::TrainConfig& tc,
                                                 double u) {
  const auto first = fit_first_update(st, u);
  if (!first || first->a == 0) return std::nullopt;
  const double wd = shown_weight_decay(first->b / first->a, tc);
  const auto second = fit_second_update(st, wd, u);
  if (!second) return std::nullopt;
  const auto r = read_settings(first->a, wd, *second, tc, u);
  if (!r) return std::nullopt;
  const std::vector<std::string> diffs = setting_differences(*r, tc, u);
  if (diffs.empty()) return std::nullopt;
  const UpdateCoefficients c = predicted_coefficients(tc);
  // Both coefficients scaled alike from the case's, after a first update at the case's rate: a
  // learning rate changed from step 2 on (a schedule) reads as momentum and dampening too.
  const double t = detail::coefficient_tolerance(u), s2 = second->a / c.alpha;
  const bool rescaled = std::fabs(s2 - 1) > t && std::fabs(first->a - c.a1) <= t * c.a1 &&
                        std::fabs(second->b - s2 * c.beta) <= t * std::max(std::fabs(second->a), std::fabs(second->b));
  const std::string schedule =
      rescaled ? fmt::format("; or, with the case's momentum and dampening, learning rate {:.6g} from step 2 on (the "
                             "case's is constant), which fits equally: a later update would tell them apart",
                             tc.lr * s2)
               : std::string();
  Hypothesis h = optimizer_settings(p.param, {{"variant", "second_update_settings"},
                                              {"lr_case", tc.lr},
                                              {"lr_run", r->lr},
                                              {"momentum_case", tc.momentum},
                                              {"momentum_run", r->momentum},
                                              {"dampening_case", tc.dampening},
                                              {"dampening_run", r->dampening},
                                              {"weight_decay_case", tc.weight_decay},
                                              {"weight_decay_run", wd},
                                              {"lr_from_step2", rescaled ? nlohmann::json(tc.lr * s2) : nlohmann::json(nullptr)}});
  h.description = fmt::format(
      "the second update of {} is an SGD step with other settings: {} ({} − {} = {} fits every element, from the "
      "run's own steps 0 and 1{}; the case's is {}; the first update fixes lr{} = {:.6g}, the second separates them){}",
      p.param, join(diffs, "; "), p.w(1), p.w(2), second_form(second->a, second->b, wd, p),
      tc.nesterov ? ", Nesterov" : "", second_form(c.alpha, c.beta, tc.weight_decay, p),
      tc.nesterov ? "·(1 + momentum)" : "", first->a, schedule);
  h.cause = "the optimizer is configured otherwise than the case's schedule; the second update is the first that "
            "reads the momentum buffer, so it is where momentum and dampening show";
  h.fix = settings_fix(tc);
  return h;
}

// What tells the candidates of a first update apart (step 2), and what it said.
struct Resolution {
  std::vector<const Candidate*> fitting;  // the candidates step 2 agrees with
  std::string sentence;
};

Resolution resolve_with_step2(const std::vector<Candidate>& cands, const OwnSteps& st, double a1, double wd,
                              const ParamNames& p, const train::TrainConfig& tc, bool has_step2, double u) {
  Resolution r;
  const std::string tie = fmt::format("{} (the first update that reads the momentum buffer)", p.w(2));
  if (!has_step2) {
    const auto kept = train::checkpoint_steps(tc);
    r.sentence = std::find(kept.begin(), kept.end(), 2) != kept.end()
                     ? fmt::format("{} would tell them apart, and the run has no {} and {}", tie, p.w(2), p.g(1))
                     : fmt::format("a step-2 checkpoint would tell them apart, and this case of {} steps has none",
                                   tc.steps);
    return r;
  }
  const auto second = fit_second_update(st, wd, u);
  if (second)
    for (const auto& c : cands)
      if (same_coefficients(c.predicted, a1, *second, u)) r.fitting.push_back(&c);
  if (r.fitting.size() == 1) {
    std::vector<std::string> others;
    for (const auto& c : cands)
      if (&c != r.fitting.front()) others.push_back(c.phrase);
    r.sentence = fmt::format("{} tells them apart: {} fits it on every element, {}", tie, r.fitting.front()->phrase,
                             others.size() == 1 ? others.front() + " does not" : "neither " + join(others, " nor ") + " does");
  } else if (r.fitting.empty()) {
    r.sentence = fmt::format("{} fits none of them alone (its own check reads the settings it shows)", tie);
  } else {
    r.sentence = fmt::format("{} fits them too", tie);
  }
  return r;
}

// Step 1 read as settings: w0 − w1 = a·g0 + b·w0 on every element, against the case's
// a = lr (1 + momentum if Nesterov), b = a·weight_decay. `st` holds the run's step 2 too when it has
// one: where several settings fit step 1 alone, step 2 decides between them or the diagnosis says
// it cannot.
std::optional<Diagnosis> first_update_settings(const LinearFit& f, const OwnSteps& st, bool has_step2,
                                               const ParamNames& p, const train::TrainConfig& tc, double u) {
  const double a_case = predicted_coefficients(tc).a1, ratio = f.a / a_case;
  const double wd_run = f.a != 0 ? f.b / f.a : 0;
  const bool same_rate = std::fabs(ratio - 1) <= 1e-3;
  const std::vector<Candidate> cands = same_rate ? std::vector<Candidate>{} : first_update_candidates(f.a, tc);
  const auto wd_phrase = weight_decay_difference(wd_run, tc);
  if (cands.empty() && !wd_phrase) return std::nullopt;
  const std::size_t n = st.w0.size();
  nlohmann::json base = {{"lr_case", tc.lr},           {"lr_run", tc.lr},
                         {"momentum_case", tc.momentum}, {"weight_decay_case", tc.weight_decay},
                         {"weight_decay_run", wd_run}, {"update_ratio", ratio},
                         {"step1_factor", f.a}};
  // "0.05·step0_grad_weight + 5e-05·step0_weight", the second sign written out.
  auto form = [&](double a, double b) {
    return fmt::format("{:.6g}·{} {} {:.3g}·{}", a, p.g(0), b < 0 ? "−" : "+", std::fabs(b), p.w(0));
  };
  const std::string fitted = fmt::format("{} − {} = {} fits every element; the case's is {}", p.w(0), p.w(1),
                                         form(f.a, f.b), form(a_case, a_case * tc.weight_decay));
  const std::string cause =
      "the optimizer is configured or applied otherwise than the case's schedule (torch.optim.SGD: weight decay added "
      "to the gradient, the momentum buffer starting as that gradient)";
  auto hypothesis = [&](const Candidate* c, std::string description) {
    nlohmann::json params = base;
    if (c) params.update(c->params);
    Hypothesis h = optimizer_settings(p.param, std::move(params));
    h.description = std::move(description);
    h.cause = cause;
    h.fix = settings_fix(tc);
    return h;
  };
  if (cands.size() <= 1) {
    std::vector<std::string> named;
    if (!cands.empty()) named.push_back(cands.front().phrase);
    if (wd_phrase) named.push_back(*wd_phrase);
    return named_on_every_element(
        hypothesis(cands.empty() ? nullptr : &cands.front(),
                   fmt::format("the first update of {} is an SGD step with other settings: {} ({})", p.param,
                               join(named, "; "), fitted)),
        static_cast<std::int64_t>(n));
  }
  // Several settings give this first update: name them all, unless step 2 picks one.
  std::vector<std::string> phrases, settings;
  for (const auto& c : cands) phrases.push_back(c.phrase), settings.push_back(c.setting);
  base["candidates"] = settings;
  const Resolution res = resolve_with_step2(cands, st, f.a, shown_weight_decay(wd_run, tc), p, tc, has_step2, u);
  base["told_apart_by"] = res.fitting.size() == 1 ? nlohmann::json(p.w(2)) : nlohmann::json(nullptr);
  const std::string shows =
      tc.nesterov ? "lr·(1 + momentum), Nesterov's first factor" : "lr, the momentum buffer starting as the gradient";
  const std::string description = fmt::format(
      "the first update of {} is an SGD step with other settings, which step 1 alone cannot name: {}. Step 1 shows only "
      "the gradient's factor {:.6g} ({}; the case's {:.6g}), which {} each explain equally{}; {}",
      p.param, fitted, f.a, shows, a_case, join_or(phrases), wd_phrase ? "; and " + *wd_phrase : std::string(),
      res.sentence);
  if (res.fitting.size() == 1)
    return named_on_every_element(hypothesis(res.fitting.front(), description), static_cast<std::int64_t>(n));
  Diagnosis dx = named_on_every_element(hypothesis(&cands.front(), description), static_cast<std::int64_t>(n));
  for (std::size_t i = 1; i < cands.size(); ++i) {
    Hypothesis h = hypothesis(&cands[i], description);
    h.checked = static_cast<std::int64_t>(n);
    h.passes = h.confirmed_all = true;
    dx.matches.push_back(std::move(h));
  }
  dx.ambiguous = true;
  return dx;
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
  const ParamNames p{name->tensor};
  const auto all = c.tensors(in.op);
  const cases::TensorInfo* info = detail::find_tensor(all, in.tensor);
  if (!info) return std::nullopt;
  const CaseFiles files{in};
  // The run's own parameters and gradients of the steps before k.
  std::vector<Tensor> ws, gs;
  for (std::int64_t j = 0; j < k; ++j) {
    if (!detail::produced(in.run, p.w(j)) || !detail::produced(in.run, p.g(j))) return std::nullopt;
    auto w = files.run(p.w(j), info->shape), g = files.run(p.g(j), info->shape);
    if (!w || !g) return std::nullopt;
    ws.push_back(std::move(*w));
    gs.push_back(std::move(*g));
  }
  auto wk = files.run(in.tensor, info->shape);
  if (!wk) return std::nullopt;
  const std::size_t n = static_cast<std::size_t>(wk->numel());
  const double u = gradient_rounding(c.dtype);
  const OwnReplay replay{ws, gs, tc, n, u};
  const StepFn torch_sgd = &train::sgd_step<float>;
  const std::vector<float> e = replay.run(torch_sgd);
  const std::vector<double> tol = replay.tolerance(torch_sgd, e);
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
  const std::string from =
      k == 1 ? fmt::format("{} and {}", p.w(0), p.g(0))
             : fmt::format("{} and {}, with the momentum buffer of {} and {}", p.w(1), p.g(1), p.w(0), p.g(0));
  const std::string rounding =
      u > 0 ? fmt::format(" + the {} rounding of the gradient", dtype_name(c.dtype)) : std::string();
  out.reason = fmt::format(
      "{} of {} elements of {} are not the case's SGD step from the run's own {} (tolerance 4 float32 ULP{}); worst at "
      "{}: expected {:.9g}, run {:.9g} — the optimizer differs from the case's",
      beyond, n, in.tensor, from, rounding, format_coords(worst, info->shape, info->canonical_axes),
      e[static_cast<std::size_t>(worst)], wk->get(worst));

  OwnSteps st{tensor_values(ws[0]), tensor_values(gs[0]),
              k == 1 ? tensor_values(*wk) : tensor_values(ws[1]), {}, {}};
  if (k == 2) {
    st.g1 = tensor_values(gs[1]);
    st.w2 = tensor_values(*wk);
    std::optional<Hypothesis> h = second_update_variant(replay, *wk, p, tc);
    if (!h) h = second_update_settings(st, p, tc, u);
    if (h) out.diagnosis = named_on_every_element(std::move(*h), static_cast<std::int64_t>(n));
    return out;
  }
  // Step 1: which settings the run's update used, named only when the fit explains every element
  // within twice its tolerance (a layout mistake, a lost update, a rounded master do not fit).
  std::vector<double> dv(n);
  for (std::size_t i = 0; i < n; ++i) dv[i] = st.w0[i] - st.w1[i];
  const LinearFit f = fit_two(dv, st.g0, st.w0);
  if (!f.ok) return out;
  for (std::size_t i = 0; i < n; ++i)
    if (!(std::fabs(dv[i] - f.a * st.g0[i] - f.b * st.w0[i]) <= 2 * tol[i])) return out;
  // The run's step 2, when it wrote one: what tells apart the settings step 1 cannot.
  bool has_step2 = false;
  if (detail::produced(in.run, p.w(2)) && detail::produced(in.run, p.g(1))) {
    auto w2 = files.run(p.w(2), info->shape), g1 = files.run(p.g(1), info->shape);
    if (w2 && g1) {
      st.w2 = tensor_values(*w2);
      st.g1 = tensor_values(*g1);
      has_step2 = true;
    }
  }
  out.diagnosis = first_update_settings(f, st, has_step2, p, tc, u);
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
