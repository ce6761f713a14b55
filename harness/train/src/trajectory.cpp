#include "validate/train/trajectory.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "validate/train/optimizer.hpp"

namespace validate::train {

template <class T>
Result<Trajectory<T>> run_trajectory(const TrainConfig& c, Tensors<T> params, const StepFunction<T>& step_fn) {
  Trajectory<T> out;
  const std::vector<std::int64_t> keep = checkpoint_steps(c);
  std::map<std::string, OptimizerState<T>> state;
  out.losses.reserve(static_cast<std::size_t>(c.steps));
  for (std::int64_t s = 0; s < c.steps; ++s) {
    auto r = step_fn(s, params);
    if (!r) return Error{fmt::format("training step {}: {}", s, r.message())};
    if (!std::isfinite(r->loss))
      return Error{fmt::format("training step {}: the loss is {} (the trajectory diverged)", s, r->loss)};
    out.losses.push_back(r->loss);
    const bool checkpoint = std::binary_search(keep.begin(), keep.end(), s);
    if (checkpoint) out.checkpoints.push_back({s, params, r->grads});
    for (auto& [name, p] : params) {
      auto g = r->grads.find("grad_" + name);
      if (g == r->grads.end()) return Error{fmt::format("training step {}: no grad_{} for parameter '{}'", s, name, name)};
      if (g->second.size() != p.size())
        return Error{fmt::format("training step {}: grad_{} has {} elements, parameter '{}' {}", s, name, g->second.size(),
                                 name, p.size())};
      optimizer_step(p.data(), g->second.data(), p.size(), state[name], c);
    }
  }
  out.final_params = std::move(params);
  return out;
}

template Result<Trajectory<double>> run_trajectory(const TrainConfig&, Tensors<double>, const StepFunction<double>&);
template Result<Trajectory<float>> run_trajectory(const TrainConfig&, Tensors<float>, const StepFunction<float>&);

Philox step_stream(const Philox& base, std::int64_t step) {
  if (step == 0) return base;
  // A second FNV pass over the decimal step, seeded by the base key: distinct per step, stable
  // across platforms, and unrelated to any single-step case's key.
  return Philox(fnv1a64("train-step:" + std::to_string(step), base.key()));
}

}  // namespace validate::train
