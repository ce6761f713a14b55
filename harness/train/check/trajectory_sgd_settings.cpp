// The SGD settings a run's own first two updates show (sgd_settings.hpp).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sgd_settings.hpp"
#include "validate/metrics/ulp.hpp"

namespace validate::compare::detail {

namespace {

bool near(double x, double y) { return std::fabs(x - y) <= 1e-3 * std::max(std::fabs(y), 1e-12); }

}  // namespace

LinearFit fit_two(const std::vector<double>& d, const std::vector<double>& x, const std::vector<double>& y) {
  double xx = 0, xy = 0, yy = 0, xd = 0, yd = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    xx += x[i] * x[i];
    xy += x[i] * y[i];
    yy += y[i] * y[i];
    xd += x[i] * d[i];
    yd += y[i] * d[i];
  }
  const double det = xx * yy - xy * xy;
  LinearFit f;
  if (!(xx > 0) || !(yy > 0) || !(det > 1e-12 * xx * yy)) return f;  // x and y (nearly) parallel
  f.a = (xd * yy - yd * xy) / det;
  f.b = (yd * xx - xd * xy) / det;
  f.ok = std::isfinite(f.a) && std::isfinite(f.b);
  return f;
}

UpdateCoefficients predicted_coefficients(const train::TrainConfig& c) {
  const double lr = c.lr, mu = c.momentum, keep = 1 - c.dampening;
  if (mu == 0) return {lr, lr, 0};
  if (c.nesterov) return {lr * (1 + mu), lr * (1 + mu * keep), lr * mu * mu};
  return {lr, lr * keep, lr * mu};
}

namespace {

// d ≈ a·x + b·y on every element, within 8 float32 ULP of the parameters (`from`, `to`) plus `u` of
// each term; the fit, or nothing.
std::optional<LinearFit> fit_every_element(const std::vector<double>& from, const std::vector<double>& to,
                                           const std::vector<double>& x, const std::vector<double>& y, double u) {
  const std::size_t n = to.size();
  if (n < 3 || from.size() != n || x.size() != n || y.size() != n) return std::nullopt;
  std::vector<double> d(n);
  for (std::size_t i = 0; i < n; ++i) d[i] = from[i] - to[i];
  const LinearFit f = fit_two(d, x, y);
  if (!f.ok) return std::nullopt;
  for (std::size_t i = 0; i < n; ++i) {
    const double ax = f.a * x[i], by = f.b * y[i];
    const double tol = 8 * float32_ulp(std::max({std::fabs(from[i]), std::fabs(to[i]), std::fabs(d[i])})) +
                       u * (std::fabs(ax) + std::fabs(by));
    if (!(std::fabs(d[i] - ax - by) <= tol)) return std::nullopt;
  }
  return f;
}

}  // namespace

std::optional<LinearFit> fit_first_update(const OwnSteps& s, double u) {
  return fit_every_element(s.w0, s.w1, s.g0, s.w0, u);
}

std::optional<LinearFit> fit_second_update(const OwnSteps& s, double wd, double u) {
  const std::size_t n = s.w2.size();
  if (s.g1.size() != n || s.w1.size() != n || s.w0.size() != n || s.g0.size() != n) return std::nullopt;
  std::vector<double> x(n), y(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = s.g1[i] + wd * s.w1[i];
    y[i] = s.g0[i] + wd * s.w0[i];
  }
  return fit_every_element(s.w1, s.w2, x, y, u);
}

double coefficient_tolerance(double u) { return std::max(1e-3, u); }

bool same_coefficients(const UpdateCoefficients& p, double a1, const LinearFit& second, double u) {
  const double t = coefficient_tolerance(u);
  const double scale = std::max(std::fabs(p.alpha), std::fabs(p.beta));
  return std::fabs(p.a1 - a1) <= t * std::fabs(p.a1) && std::fabs(p.alpha - second.a) <= t * scale &&
         std::fabs(p.beta - second.b) <= t * scale;
}

std::vector<Candidate> first_update_candidates(double a1, const train::TrainConfig& c) {
  std::vector<Candidate> out;
  auto add = [&](const char* setting, std::string phrase, nlohmann::json params, UpdateCoefficients p) {
    params["setting"] = setting;
    out.push_back(Candidate{setting, std::move(phrase), std::move(params), p});
  };
  const double mu = c.momentum;
  train::TrainConfig lr = c;
  lr.lr = a1 / (c.nesterov ? 1 + mu : 1);
  add("learning_rate", fmt::format("learning rate {:.6g} instead of {}", lr.lr, c.lr), {{"lr_run", lr.lr}},
      predicted_coefficients(lr));
  if (c.nesterov) {
    if (near(a1, c.lr)) {
      train::TrainConfig plain = c, none = c;
      plain.nesterov = false;
      none.momentum = 0;
      add("nesterov_missing", fmt::format("Nesterov momentum missing (plain momentum {})", mu),
          {{"lr_run", c.lr}, {"momentum_run", mu}}, predicted_coefficients(plain));
      add("momentum", fmt::format("momentum 0 instead of {}", mu), {{"lr_run", c.lr}, {"momentum_run", 0.0}},
          predicted_coefficients(none));
    } else if (const double m = a1 / c.lr - 1; m > 0 && m < 1) {
      train::TrainConfig other = c;
      other.momentum = m;
      add("momentum", fmt::format("momentum {:.4g} instead of {}", m, mu), {{"lr_run", c.lr}, {"momentum_run", m}},
          predicted_coefficients(other));
    }
  } else if (mu != 0) {
    if (near(a1, c.lr * (1 + mu))) {
      train::TrainConfig nesterov = c;
      nesterov.nesterov = true;
      nesterov.dampening = 0;
      add("nesterov_applied", "Nesterov momentum applied (the case has none)", {{"lr_run", c.lr}},
          predicted_coefficients(nesterov));
    }
    if (c.dampening != 0 && near(a1, c.lr * (1 - c.dampening))) {
      // The buffer started as (1 − dampening)·g0', so every later term carries it too.
      const double keep = 1 - c.dampening;
      add("dampening_first_step",
          fmt::format("dampening {} applied to the first step (torch.optim.SGD starts the momentum buffer as the "
                      "undamped gradient)",
                      c.dampening),
          {{"lr_run", c.lr}}, UpdateCoefficients{c.lr * keep, c.lr * keep, c.lr * mu * keep});
    }
  }
  return out;
}

std::optional<SgdReading> read_settings(double a1, double wd, const LinearFit& second, const train::TrainConfig& c,
                                        double u) {
  SgdReading r;
  r.weight_decay = wd;
  if (c.nesterov) {
    const double q = second.b / a1;  // momentum² / (1 + momentum)
    r.momentum = q > 0 ? (q + std::sqrt(q * q + 4 * q)) / 2 : 0;
    r.lr = a1 / (1 + r.momentum);
    r.dampening = r.momentum > 0 ? 1 - (second.a / r.lr - 1) / r.momentum : c.dampening;
  } else {
    r.lr = a1;
    r.momentum = second.b / a1;
    r.dampening = 1 - second.a / a1;
  }
  const double t = coefficient_tolerance(u);
  if (std::fabs(r.momentum) <= t) r.momentum = 0;
  if (r.momentum == 0) r.dampening = c.dampening;  // without a buffer it does not show
  if (std::fabs(r.dampening) <= t) r.dampening = 0;
  const bool settings = std::isfinite(r.lr) && r.lr > 0 && r.momentum >= 0 && r.momentum < 1 && r.dampening >= 0 &&
                        r.dampening < 1;
  if (!settings) return std::nullopt;
  return r;
}

std::vector<std::string> setting_differences(const SgdReading& r, const train::TrainConfig& c, double u) {
  std::vector<std::string> out;
  const double t = coefficient_tolerance(u);
  if (std::fabs(r.lr - c.lr) > t * c.lr) out.push_back(fmt::format("learning rate {:.6g} instead of {}", r.lr, c.lr));
  if (std::fabs(r.momentum - c.momentum) > t)
    out.push_back(c.momentum == 0 ? fmt::format("momentum {:.4g} (the case has none)", r.momentum)
                                  : fmt::format("momentum {:.4g} instead of {}", r.momentum, c.momentum));
  if (r.momentum > 0 && std::fabs(r.dampening - c.dampening) > t)
    out.push_back(fmt::format("dampening {:.4g} instead of {}", r.dampening, c.dampening));
  if (auto w = weight_decay_difference(r.weight_decay, c)) out.push_back(*w);
  return out;
}

std::optional<std::string> weight_decay_difference(double wd_run, const train::TrainConfig& c) {
  if (std::fabs(wd_run - c.weight_decay) <= std::max(0.05 * c.weight_decay, 1e-5)) return std::nullopt;
  if (c.weight_decay != 0 && std::fabs(wd_run) <= 0.05 * c.weight_decay)
    return fmt::format("weight decay missing (the case's is {})", c.weight_decay);
  return fmt::format("weight decay {:.3g} instead of {}", wd_run, c.weight_decay);
}

}  // namespace validate::compare::detail
