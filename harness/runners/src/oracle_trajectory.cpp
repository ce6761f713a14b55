// The oracle's training trajectory (docs/training.md): the float64 reference of the op as the step
// function of train::run_trajectory, with the optimizer in float64 too. Every step's forward and
// backward is oracle_compute in its float64 mode, in the run's layouts, so a wrong layout conversion
// shows in the trajectory as in the single step.
#include <cmath>

#include <fmt/format.h>

#include "validate/runners/oracle_runner.hpp"
#include "validate/train/tensor_names.hpp"
#include "validate/train/trajectory.hpp"

namespace validate::runners {

namespace {

std::vector<double> to_doubles(const Tensor& t) {
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = t.get(static_cast<std::int64_t>(i));
  return v;
}

Tensor from_doubles(const std::vector<double>& v, const Shape& shape, DType dtype) {
  Tensor t(dtype, shape);
  if (dtype == DType::float16) {
    for (std::size_t i = 0; i < v.size(); ++i) t.data<std::uint16_t>()[i] = double_to_float16_bits(v[i]);
  } else {
    for (std::size_t i = 0; i < v.size(); ++i) t.set(static_cast<std::int64_t>(i), v[i]);  // one rounding
  }
  return t;
}

}  // namespace

Result<std::map<std::string, Tensor>> oracle_trajectory(
    const cases::Case& c, cases::Op op, const std::map<std::string, const Tensor*>& inputs,
    const std::function<std::map<std::string, Tensor>(std::int64_t)>& step_inputs,
    const layout::TensorSpecs& specs, DType result_dtype, int threads, OracleTimes* times) {
  const std::string where = fmt::format("oracle trajectory {}/{} {}", dtype_name(c.dtype), c.name, cases::op_name(op));
  if (!c.train) return Error{where + ": the case has no \"train\""};
  if (c.train->steps > 1 && !step_inputs) return Error{where + ": no source for the later steps' batches"};
  cases::Case one = c;  // one step of the op: its own tensor table, no trajectory tensors
  one.train.reset();
  const auto params = c.parameters(op);
  train::Tensors<double> start;
  for (const auto& p : params) {
    auto it = inputs.find(p.name);
    if (it == inputs.end() || !it->second) return Error{where + ": input '" + p.name + "' missing"};
    start[p.name] = to_doubles(*it->second);
  }
  const train::StepFunction<double> step = [&](std::int64_t s, const train::Tensors<double>& now)
      -> Result<train::StepOutcome<double>> {
    std::map<std::string, Tensor> drawn = s == 0 ? std::map<std::string, Tensor>{} : step_inputs(s);
    std::map<std::string, Tensor> held;  // the parameters as float64 tensors
    std::map<std::string, const Tensor*> in;
    for (const auto& t : one.inputs(op)) {
      if (t.parameter) {
        held.emplace(t.name, from_doubles(now.at(t.name), t.shape, DType::float64));
        in[t.name] = &held.at(t.name);
      } else if (s == 0) {
        in[t.name] = inputs.count(t.name) ? inputs.at(t.name) : nullptr;
      } else {
        auto it = drawn.find(t.name);
        if (it == drawn.end()) return Error{"no batch tensor '" + t.name + "'"};
        in[t.name] = &it->second;
      }
    }
    auto r = oracle_compute(one, op, in, specs, DType::float64, threads, times);
    if (!r) return r.status();
    train::StepOutcome<double> o;
    o.loss = r->at("loss").get(0);
    for (const auto& p : params) o.grads["grad_" + p.name] = to_doubles(r->at("grad_" + p.name));
    return o;
  };
  auto traj = train::run_trajectory<double>(*c.train, std::move(start), step);
  if (!traj) return Error{where + ": " + traj.message()};
  std::map<std::string, Tensor> out;
  Tensor losses(DType::float32, Shape{c.train->steps});
  for (std::size_t s = 0; s < traj->losses.size(); ++s) losses.set(static_cast<std::int64_t>(s), traj->losses[s]);
  out.emplace(train::kLossCurve, std::move(losses));
  for (const auto& cp : traj->checkpoints) {
    for (const auto& p : params) {
      out.emplace(train::checkpoint_tensor(cp.step, p.name), from_doubles(cp.params.at(p.name), p.shape, result_dtype));
      out.emplace(train::checkpoint_tensor(cp.step, "grad_" + p.name),
                  from_doubles(cp.grads.at("grad_" + p.name), p.shape, result_dtype));
    }
  }
  return out;
}

}  // namespace validate::runners
