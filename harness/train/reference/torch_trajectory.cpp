// A training case's trajectory with LibTorch's own optimizer (docs/training.md): every step's
// batch, loss and parameters, and the checkpoints' two-stack bounds.
#include "torch_internal.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "validate/metrics/bounds.hpp"
#include "validate/ops/registry.hpp"
#include "validate/train/tensor_names.hpp"

namespace validate::generate {

using namespace detail;

namespace {

// |H| v for the MSE loss of an op that is linear in its parameters (conv2d, conv_transpose2d,
// matmul; the bias too): H = (2/N) J^T J with J = dy/dparams, which holds the data inputs' values,
// so |H| v <= (2/N) |J|^T (|J| v), the op's forward with |data| and v as parameters, then the
// backward of (2/N) <z, forward> with respect to them. `data` are the non-parameter leaves; v and
// the result are CPU float64 tensors shaped like the parameters.
std::map<std::string, at::Tensor> abs_hessian_times(const ops::OpParams& params, const ops::TorchLeaves& data,
                                                    const std::map<std::string, at::Tensor>& v, double n_out,
                                                    const at::Device& dev) {
  ops::TorchLeaves in;
  for (const auto& [name, t] : data) in.emplace(name, t.detach().to(at::kFloat).abs());
  for (const auto& [name, t] : v) in.emplace(name, t.to(dev, at::kFloat).requires_grad_(true));
  at::Tensor z = ops::torch_forward(params, in);
  z.backward(z.detach() * (2.0 / n_out));
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : v) out.emplace(name, in.at(name).grad().detach().to(at::kCPU, at::kDouble));
  return out;
}

// f applied to every element of a CPU float64 tensor (a fresh one, same shape).
template <class F>
at::Tensor map_elements(const at::Tensor& t, F f) {
  at::Tensor c = t.to(at::kCPU, at::kDouble).contiguous();
  at::Tensor out = at::empty_like(c);
  const double* p = c.data_ptr<double>();
  double* q = out.data_ptr<double>();
  for (std::int64_t i = 0, n = c.numel(); i < n; ++i) q[i] = f(p[i], i);
  return out;
}

// The two-stack bounds of an SGD trajectory's checkpoints (docs/training.md, "Checkpoint bounds"):
// how far two correct stacks that start from the same parameters and batches may be apart at step
// k, element by element. Each step's gradient is held to twice its single-step bound (metrics
// bounds.hpp, at lambda = kCheckpointLambda, from the scale pass at the reference's point); that
// difference is carried through the case's SGD (momentum, dampening, Nesterov) and the steps add
// in root-sum-square, plus the float32 roundings of each update. What a parameter difference does
// to the later gradients, H e (and weight decay's wd e), is left out of the sum: on this convex
// loss a converging SGD shrinks it along every stiff direction and keeps it along the flat ones
// (stated in docs/training.md, and checked by the correct stacks of the training workflows). Mixed precision adds one term that is
// not small: the forward sees the masters cast to the case dtype, and two masters a hair apart on
// either side of a rounding midpoint cast one ULP apart, so every step s >= 1 adds |H| ulp_d(w).
constexpr double kCheckpointLambda = 8;
struct TrajectoryBounds {
  std::map<std::string, at::Tensor> e;  // parameter difference bound (CPU float64)
  // Running sums of the steps' squared gradient bounds, weighted as torch_trajectory says, and
  // the update roundings' linear sum.
  std::map<std::string, at::Tensor> a0, a1, a2, linear;
};

// LibTorch's own optimizer (the same update as torch.optim.SGD / torch.optim.Adam): the reference
// is what PyTorch does.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const train::TrainConfig& tc, const std::vector<at::Tensor>& list) {
  switch (tc.optimizer) {
    case train::Optimizer::sgd:
      return std::make_unique<torch::optim::SGD>(list, torch::optim::SGDOptions(tc.lr)
                                                           .momentum(tc.momentum)
                                                           .dampening(tc.dampening)
                                                           .weight_decay(tc.weight_decay)
                                                           .nesterov(tc.nesterov));
    case train::Optimizer::adam:
      return std::make_unique<torch::optim::Adam>(
          list, torch::optim::AdamOptions(tc.lr).betas({tc.beta1, tc.beta2}).eps(tc.eps).weight_decay(tc.weight_decay));
  }
  return nullptr;
}

// What one step's bounds need from the case, fixed for the trajectory.
struct BoundContext {
  const cases::Case& c;
  cases::Op op;
  const ops::OpParams& params;
  double k_op;  // the op's reduction length
  bool narrow;  // mixed precision: the forward sees the masters cast to the case dtype
  at::Device dev;
};

// This step's gradient bound, two stacks (delta), and the parameters before the step (w_before).
// Kept steps also store their checkpoints' scales into `out`.
void step_gradient_bounds(const BoundContext& bc, const ops::TorchLeaves& params, const ops::TorchLeaves& leaves,
                          const at::Tensor& y, const at::Tensor& target, std::int64_t s, bool kept,
                          const TrajectoryBounds& tb, std::map<std::string, at::Tensor>& delta,
                          std::map<std::string, at::Tensor>& w_before, std::map<std::string, Tensor>& out) {
  const double u = std::ldexp(1.0, -24);
  ops::TorchLeaves data;
  std::map<std::string, at::Tensor> sq;
  for (const auto& [name, t] : leaves)
    if (!params.count(name)) data.emplace(name, t);
  std::vector<std::string> names;
  for (const auto& [name, p] : params) names.push_back(name);
  scale_pass(bc.params, leaves, y, target, bc.c.dtype, bc.op, names, sq);
  const double n_out = static_cast<double>(y.numel());
  std::map<std::string, at::Tensor> cast;  // mixed precision: a cast one ULP apart (s >= 1)
  for (const auto& [name, p] : params) {
    w_before.emplace(name, p.detach().to(at::kCPU, at::kDouble));
    const at::Tensor g = p.grad().detach().to(at::kCPU, at::kDouble).contiguous();
    const at::Tensor rho = sq.at(name).clamp_min(0).sqrt().to(at::kCPU, at::kDouble).contiguous();
    compare::BoundOptions o;
    o.dtype = bc.c.dtype;
    o.gradient = true;
    o.n = gradient_reduction_length(name, p.numel(), n_out, bc.k_op);
    o.lambda = kCheckpointLambda;
    o.split_gradient = true;  // the scale pass's gradient scale (bounds.hpp)
    const double* pr = rho.data_ptr<double>();
    delta.emplace(name, map_elements(g, [&](double v, std::int64_t i) { return 2 * compare::side_bound(v, pr[i], o); }));
    if (bc.narrow && s >= 1)
      cast.emplace(name, map_elements(w_before.at(name), [&](double v, std::int64_t) { return compare::dtype_ulp(v, bc.c.dtype); }));
  }
  if (!cast.empty()) {
    const auto hc = abs_hessian_times(bc.params, data, cast, n_out, bc.dev);
    for (auto& [name, d] : delta) d.add_(hc.at(name));
  }
  if (!kept) return;
  // The parameter: the difference carried so far, plus each side's float32 storage. Its gradient:
  // this step's own bound, plus what the parameters' difference (and a cast one ULP apart) moves it
  // by, |H| (e + ulp_d).
  std::map<std::string, at::Tensor> apart;
  for (const auto& [name, e] : tb.e) apart.emplace(name, cast.count(name) ? e + cast.at(name) : e.clone());
  const auto he = abs_hessian_times(bc.params, data, apart, n_out, bc.dev);
  // Stored per unit lambda and per side: compare's two-stack bound is 2 lambda scale, this bound at
  // lambda = 8 (rounded up into float32).
  auto stored = [&](const at::Tensor& b, const at::Tensor& like) {
    return adopt_from_torch((b * ((1 + 0x1p-20) / (2 * kCheckpointLambda))).to(at::kFloat).reshape(like.sizes()).contiguous(),
                            DType::float32);
  };
  for (const auto& [name, p] : params) {
    const at::Tensor pb = tb.e.at(name) + 2 * u * w_before.at(name).abs();
    out.emplace(train::checkpoint_tensor(s, name) + "_scale", stored(pb, p));
    out.emplace(train::checkpoint_tensor(s, "grad_" + name) + "_scale", stored(delta.at(name) + he.at(name), p));
  }
}

// After step s's update: carries its gradient bound into the parameters' difference bound.
//
// Gradient s reaches the parameter at step k through every update from s to k - 1:
// torch.optim.SGD's buffer takes it whole at step 0 and (1 - dampening) of it later, and keeps
// mu^(t - s) of it at step t; the update is lr times the buffer (Nesterov: lr (g + mu buf)). So its
// weight in step k's parameter is lr C(k, s), C = a + b (1 - mu^(k - s)), a = 1 for Nesterov (else
// 0), b = (mu for Nesterov, else 1) (1 - d_s) / (1 - mu); C = 1 without momentum. The steps' bounds
// add in root-sum-square (their roundings are independent, the model of every bound here):
// sum_s lr^2 C^2 delta_s^2 = lr^2 (A0 - 2 A1 + A2), A0 = sum (a + b)^2 delta^2,
// A1 = sum (a + b) b mu^(k - s) delta^2, A2 = sum b^2 mu^(2 (k - s)) delta^2, kept as running sums.
// Weight decay acts on the parameters' difference as a contraction (-lr wd e), like H, and is left
// out with it. The float32 roundings of each update add linearly (tiny): the stored parameter, and
// the product, the buffer's add and the step's subtraction on the update's size, the buffer's
// carried up to 1 / (1 - mu) times.
void carry_bounds(const train::TrainConfig& tc, std::int64_t s, const ops::TorchLeaves& params,
                  const std::map<std::string, at::Tensor>& delta, const std::map<std::string, at::Tensor>& w_before,
                  TrajectoryBounds& tb) {
  const double u = std::ldexp(1.0, -24);
  const double mu = tc.momentum, carry = mu < 1 ? 1 / (1 - mu) : 1;
  const double damp = s == 0 ? 0 : tc.dampening;
  const double a = mu > 0 && tc.nesterov ? 1 : 0;
  const double b = mu > 0 ? (tc.nesterov ? mu : 1) * (1 - damp) / (1 - mu) : 0;
  const double c0 = mu > 0 ? a + b : 1;
  for (const auto& [name, p] : params) {
    const at::Tensor d2 = delta.at(name).square();
    tb.a0.at(name) += c0 * c0 * d2;
    tb.a1.at(name) = mu * (tb.a1.at(name) + c0 * b * d2);
    tb.a2.at(name) = mu * mu * (tb.a2.at(name) + b * b * d2);
    const at::Tensor w_after = p.detach().to(at::kCPU, at::kDouble);
    tb.linear.at(name) += 2 * u * (w_after.abs() + (3 + carry) * (w_after - w_before.at(name)).abs());
    tb.e.at(name) = tc.lr * (tb.a0.at(name) - 2 * tb.a1.at(name) + tb.a2.at(name)).clamp_min(0).sqrt() +
                    tb.linear.at(name);
  }
}

}  // namespace

Result<std::map<std::string, Tensor>> torch_trajectory(const cases::Case& c, cases::Op op,
                                                       const std::map<std::string, const Tensor*>& in,
                                                       const StepInputs& step_inputs, const TorchDevice& device,
                                                       TorchTimes* times, bool scales) {
  using Clock = std::chrono::steady_clock;
  const auto t_start = Clock::now();
  const std::string where = std::string("LibTorch trajectory of ") + c.name + " " + cases::op_name(op);
  if (!c.train) return Error{where + ": the case has no \"train\""};
  const cases::OpInstance* inst = c.find(op);
  if (!inst) return Error{where + ": the case has no such op"};
  if (c.train->steps > 1 && !step_inputs) return Error{where + ": no source for the later steps' batches"};
  const train::TrainConfig& tc = *c.train;
  const at::Device dev(device.used);
  const std::vector<std::int64_t> keep = train::checkpoint_steps(tc);
  // Mixed precision, as torch.autocast trains (docs/training.md, "Mixed precision"): the parameters
  // and the optimizer stay float32; the forward sees them cast to the case dtype (DtypePlan, as
  // torch_compute computes), whose backward casts the gradient the optimizer receives back through
  // it. float32 cases: every cast is the identity.
  const DtypePlan plan(c.dtype, dev);
  std::map<std::string, Tensor> out;
  try {
    // The parameters are owned copies (the optimizer updates them in place); the rest of the inputs
    // are drawn anew every step.
    ops::TorchLeaves params;
    std::vector<at::Tensor> list;
    for (const auto& p : c.parameters(op)) {
      at::Tensor t = to_torch(*in.at(p.name), at::kFloat, dev).clone().requires_grad_(true);
      params.emplace(p.name, t);
      list.push_back(t);
    }
    const std::unique_ptr<torch::optim::Optimizer> optimizer = make_optimizer(tc, list);
    torch::optim::Optimizer& opt = *optimizer;
    // Checkpoint bounds: SGD only (Adam divides each update by the root of its second moment, which
    // near eps turns a gradient's rounding into an update of any size: its checkpoints keep the
    // fixed gate).
    const bool bound = scales && tc.optimizer == train::Optimizer::sgd;
    const BoundContext bc{c, op, inst->params, static_cast<double>(ops::find(op).reduction_length(inst->params)),
                          c.dtype != DType::float32, dev};
    TrajectoryBounds tb;
    if (bound)
      for (const auto& [name, p] : params) {
        for (auto* m : {&tb.e, &tb.a0, &tb.a1, &tb.a2, &tb.linear})
          m->emplace(name, at::zeros(p.sizes(), at::TensorOptions().dtype(at::kDouble)));
      }
    Tensor losses(DType::float32, Shape{tc.steps});
    for (std::int64_t s = 0; s < tc.steps; ++s) {
      std::map<std::string, Tensor> drawn;
      if (s > 0) drawn = step_inputs(s);
      auto data = [&](const std::string& name) -> const Tensor& {
        if (s == 0) return *in.at(name);
        auto it = drawn.find(name);
        if (it == drawn.end()) throw std::out_of_range("step " + std::to_string(s) + " has no input '" + name + "'");
        return it->second;
      };
      // As torch_compute: every input but the target is a leaf, so step 0 is the single step exactly.
      ops::TorchLeaves leaves = params;
      for (const auto& t : c.inputs(op))
        if (!t.parameter && t.name != "target") leaves.emplace(t.name, to_torch(data(t.name), plan.compute, dev).requires_grad_(true));
      for (const auto& [name, p] : params) leaves[name] = plan.narrow(p);
      const at::Tensor target = to_torch(data("target"), at::kFloat, dev);
      opt.zero_grad();
      const at::Tensor y = plan.narrow(ops::torch_forward(inst->params, leaves));
      at::Tensor loss = torch::mse_loss(y.to(at::kFloat), target);
      loss.backward();
      const float l = loss.item<float>();
      if (!std::isfinite(l)) return Error{where + ": the loss is " + std::to_string(l) + " at step " + std::to_string(s) + " (the trajectory diverged)"};
      losses.data<float>()[s] = l;
      const bool kept = std::binary_search(keep.begin(), keep.end(), s);
      if (kept) {
        for (const auto& [name, p] : params) out.emplace(train::checkpoint_tensor(s, name), from_torch(p, DType::float32));
        for (const auto& [name, p] : params)
          out.emplace(train::checkpoint_tensor(s, "grad_" + name), from_torch(p.grad(), plan.storage));
      }
      std::map<std::string, at::Tensor> delta, w_before;  // this step's gradient bound, two stacks
      if (bound) step_gradient_bounds(bc, params, leaves, y, target, s, kept, tb, delta, w_before, out);
      opt.step();
      if (bound) carry_bounds(tc, s, params, delta, w_before, tb);
    }
    out.emplace(train::kLossCurve, std::move(losses));
  } catch (const c10::Error& e) {
    return Error{where + ": " + e.what_without_backtrace()};
  } catch (const std::out_of_range& e) {
    return Error{where + ": " + e.what()};
  }
  if (times) times->compute_s += std::chrono::duration<double>(Clock::now() - t_start).count();
  return out;
}

}  // namespace validate::generate
