// The error bounds of training checkpoints (docs/training.md, "Checkpoint bounds"), re-derived here
// where they have a closed form: step 0's gradient is the single step's (twice its bound, from the
// single step's own scale), step 0's parameter is each side's float32 storage, and step 1's
// parameter is the first update's rate times step 0's gradient bound plus the update's roundings.
// On the odd geometry (every axis a different size, batch 2, stride, padding, dilation, groups,
// bias), SGD with momentum, dampening and weight decay, float32 and bfloat16 (mixed precision).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "generate/generate_fixture.hpp"
#include "validate/generate/inputs.hpp"
#include "validate/generate/torch_reference.hpp"
#include "validate/metrics/bounds.hpp"
#include "validate/ops/registry.hpp"
#include "validate/train/tensor_names.hpp"

using namespace validate;
using validate::testing::odd_case;

namespace {

class CheckpointBounds : public ::testing::TestWithParam<DType> {};

// |got - want| <= rel * |want| on every element (the stored scale is float32, rounded up by 2^-20).
void expect_rel(const Tensor& got, const std::vector<double>& want, double rel, const std::string& what) {
  ASSERT_EQ(static_cast<std::size_t>(got.numel()), want.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(got.get(static_cast<std::int64_t>(i)) - want[i]) <= rel * std::fabs(want[i])) && ++bad <= 3)
      ADD_FAILURE() << what << "[" << i << "]: " << got.get(static_cast<std::int64_t>(i)) << " vs " << want[i];
  EXPECT_EQ(bad, 0) << what;
}

TEST_P(CheckpointBounds, FirstStepsFollowTheDerivation) {
  const DType dt = GetParam();
  cases::Case c = odd_case(dt);
  train::TrainConfig t;
  t.steps = 3, t.lr = 0.05, t.momentum = 0.9, t.dampening = 0.1, t.weight_decay = 1e-3;
  c.train = t;
  const cases::Op op = cases::Op::conv2d;
  auto dev = generate::open_torch_device("cpu", false);
  ASSERT_TRUE(dev);
  auto in = generate::make_inputs(c, op, 42, generate::Fill::random);
  std::map<std::string, const Tensor*> view;
  for (auto& [k, v] : in) view[k] = &v;
  auto single = generate::torch_compute(c, op, view, *dev, nullptr, nullptr, /*scales=*/true);
  auto traj = generate::torch_trajectory(
      c, op, view, [&](std::int64_t s) { return generate::make_inputs(c, op, 42, generate::Fill::random, 1, s); }, *dev,
      nullptr, /*scales=*/true);
  ASSERT_TRUE(single && traj) << (single ? traj.message() : single.message());
  for (std::int64_t k : {0, 1, 2})
    for (const char* p : {"weight", "bias", "grad_weight", "grad_bias"})
      ASSERT_EQ(traj->count(train::checkpoint_tensor(k, p) + "_scale"), 1u) << k << " " << p;

  const double u = std::ldexp(1.0, -24), lambda = 8, per_lambda = 2 * lambda;  // stored: bound / (2 lambda)
  const double n_out = static_cast<double>(single->at("output").numel());
  const double k_op = static_cast<double>(ops::find(op).reduction_length(c.find(op)->params));
  for (const std::string p : {"weight", "bias"}) {
    const Tensor& g = single->at("grad_" + p);
    const Tensor& rho = single->at("grad_" + p + "_scale");
    const Tensor& w0 = in.at(p);
    const Tensor& w1 = traj->at(train::checkpoint_tensor(1, p));
    compare::BoundOptions o;
    o.dtype = dt;
    o.gradient = true;
    o.lambda = lambda;
    o.split_gradient = true;  // the scale pass's gradient scale
    const double mine = static_cast<double>(g.numel());
    o.n = std::ceil(p == "bias" ? n_out / mine : n_out * k_op / mine);
    std::vector<double> grad0, param0, param1;
    for (std::int64_t i = 0; i < g.numel(); ++i) {
      const double delta0 = 2 * compare::side_bound(g.get(i), rho.get(i), o);
      grad0.push_back(delta0 / per_lambda);
      param0.push_back(2 * u * std::fabs(w0.get(i)) / per_lambda);
      // Step 0's update is lr g0 (the buffer takes g0 whole, no dampening, no Nesterov): its
      // weight is lr; then four float32 roundings of the update and the buffer's carried
      // 1 / (1 - mu) times, and each side's stored parameter, twice (after the update, and as the
      // checkpoint).
      const double a = std::fabs(w1.get(i)), d = std::fabs(w1.get(i) - w0.get(i));
      param1.push_back((t.lr * delta0 + 2 * u * (a + (3 + 1 / (1 - t.momentum)) * d) + 2 * u * a) / per_lambda);
    }
    expect_rel(traj->at(train::checkpoint_tensor(0, "grad_" + p) + "_scale"), grad0, 1e-5, "step0_grad_" + p);
    expect_rel(traj->at(train::checkpoint_tensor(0, p) + "_scale"), param0, 1e-5, "step0_" + p);
    expect_rel(traj->at(train::checkpoint_tensor(1, p) + "_scale"), param1, 1e-5, "step1_" + p);
    // Later steps only add: step 2's parameter bound is at least step 1's difference bound.
    const Tensor& s2 = traj->at(train::checkpoint_tensor(2, p) + "_scale");
    for (std::int64_t i = 0; i < s2.numel(); ++i) EXPECT_GE(s2.get(i) * per_lambda, t.lr * grad0[i] * per_lambda) << p << i;
  }
}

// Adam's checkpoints have no bound (its update divides by the root of the second moment): none is
// written, and compare gates them by the fixed rtol.
TEST(CheckpointBoundsAdam, NoneIsWritten) {
  cases::Case c = odd_case(DType::float32);
  train::TrainConfig t;
  t.steps = 2, t.optimizer = train::Optimizer::adam, t.lr = 1e-3;
  c.train = t;
  auto dev = generate::open_torch_device("cpu", false);
  ASSERT_TRUE(dev);
  auto in = generate::make_inputs(c, cases::Op::conv2d, 42, generate::Fill::random);
  std::map<std::string, const Tensor*> view;
  for (auto& [k, v] : in) view[k] = &v;
  auto traj = generate::torch_trajectory(
      c, cases::Op::conv2d, view,
      [&](std::int64_t s) { return generate::make_inputs(c, cases::Op::conv2d, 42, generate::Fill::random, 1, s); }, *dev,
      nullptr, /*scales=*/true);
  ASSERT_TRUE(traj) << traj.message();
  ASSERT_EQ(traj->count("step1_weight"), 1u);
  for (const auto& [name, tensor] : *traj) EXPECT_EQ(name.find("_scale"), std::string::npos) << name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CheckpointBounds, ::testing::Values(DType::float32, DType::bfloat16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
