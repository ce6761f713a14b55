// The oracle's training trajectory (docs/training.md): the float64 reference of the op as the step
// function of train::run_trajectory, with the optimizer in float64 too. Every step's forward and
// backward is oracle_compute in its float64 mode, in the run's layouts, so a wrong layout conversion
// shows in the trajectory as in the single step. A bfloat16/float16 case trains in mixed precision
// as torch.autocast does (docs/training.md, "Mixed precision"): the three casts that define it —
// the parameters to the case dtype for the forward, the output before the loss, the gradients the
// optimizer receives — are applied; everything else stays float64, the master parameters included.
#include <cmath>

#include <fmt/format.h>

#include "validate/backends/oracle_runner.hpp"
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
  // float32 keeps the oracle's float64 ideal: the casts of a float32 stack are 1e-7 and inside the
  // gate. A narrow dtype's casts are 2^-9 (bfloat16): they are the computation, not its noise.
  const bool mixed = c.dtype == DType::bfloat16 || c.dtype == DType::float16;
  auto cast = [&](std::vector<double> v) {
    if (mixed)
      for (double& x : v) x = round_to_dtype(x, c.dtype);
    return v;
  };
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
        held.emplace(t.name, from_doubles(cast(now.at(t.name)), t.shape, DType::float64));
        in[t.name] = &held.at(t.name);
      } else if (s == 0) {
        in[t.name] = inputs.count(t.name) ? inputs.at(t.name) : nullptr;
      } else {
        auto it = drawn.find(t.name);
        if (it == drawn.end()) return Error{"no batch tensor '" + t.name + "'"};
        in[t.name] = &it->second;
      }
    }
    auto r = oracle_compute(one, op, in, specs, DType::float64, threads, times,
                            mixed ? c.dtype : DType::float64);
    if (!r) return r.status();
    train::StepOutcome<double> o;
    o.loss = r->at("loss").get(0);
    for (const auto& p : params) o.grads["grad_" + p.name] = cast(to_doubles(r->at("grad_" + p.name)));
    return o;
  };
  auto traj = train::run_trajectory<double>(*c.train, std::move(start), step);
  if (!traj) return Error{where + ": " + traj.message()};
  std::map<std::string, Tensor> out;
  Tensor losses(DType::float32, Shape{c.train->steps});
  for (std::size_t s = 0; s < traj->losses.size(); ++s) losses.set(static_cast<std::int64_t>(s), traj->losses[s]);
  out.emplace(train::kLossCurve, std::move(losses));
  const DType master_dtype = result_dtype == DType::float64 ? DType::float64 : DType::float32;  // Case::storage
  for (const auto& cp : traj->checkpoints) {
    for (const auto& p : params) {
      out.emplace(train::checkpoint_tensor(cp.step, p.name), from_doubles(cp.params.at(p.name), p.shape, master_dtype));
      out.emplace(train::checkpoint_tensor(cp.step, "grad_" + p.name),
                  from_doubles(cp.grads.at("grad_" + p.name), p.shape, result_dtype));
    }
  }
  return out;
}

}  // namespace validate::runners
