// The cuDNN runner's training trajectories on the device (docs/cudnn.md, "Training cases") against
// a float64 trajectory built here from the ops' own float64 references and train::run_trajectory —
// the same loop, the same batches (generate::make_inputs by step), SGD in float64. Small cases
// whose every axis has a different size, batch 2, 20 steps with momentum and weight decay; conv2d
// in the torch, channels_last (NHWC filter: the update runs on KRSC bytes with KRSC dW) and fortran
// (strided activations, flipped filter, conv mode) presets; matmul with grad_B in B's layout and in
// another one (converted before the update); Adam, conv_transpose2d, and mixed precision's float32
// masters. Each device test skips without a GPU.
#include <gtest/gtest.h>

#include "gpu_test_util.hpp"
#include "validate/generate/inputs.hpp"
#include "validate/layout/layout.hpp"
#include "validate/backends/cudnn_runner.hpp"
#include "validate/train/tensor_names.hpp"
#include "validate/train/trajectory.hpp"
#include "validate/train/trajectory_gate.hpp"

namespace validate::runners {
namespace {

constexpr std::uint64_t kSeed = 5;

train::TrainConfig config() {
  train::TrainConfig c;
  c.steps = 20;
  c.lr = 0.05;
  c.momentum = 0.9;
  c.weight_decay = 1e-4;
  c.checkpoint_every = 5;  // checkpoints 0, 1, 5, 10, 15, 19
  return c;
}

// n 2, c 6, h 8, w 10, o 5, kh 3, kw 4, output 4 x 7: no two axes alike.
cases::Case conv_case() {
  cases::Case c;
  c.name = "train_conv";
  c.dtype = DType::float32;
  auto& p = c.params<cases::ConvParams>();
  p.n = 2, p.c = 6, p.h = 8, p.w = 10, p.o = 5, p.kh = 3, p.kw = 4;
  p.stride = {2, 1}, p.padding = {1, 0}, p.bias = true;
  c.train = config();
  return c;
}

cases::Case matmul_case() {
  cases::Case c;
  c.name = "train_mm";
  c.dtype = DType::float32;
  c.params<cases::MatmulParams>() = {6, 5, 7};
  c.train = config();
  return c;
}

std::map<std::string, Tensor> batch(const cases::Case& c, cases::Op op, std::int64_t step) {
  return generate::make_inputs(c, op, kSeed, generate::Fill::random, 1, step);
}

// One step in float64: the op's reference at `params` on the step's data inputs.
Result<train::StepOutcome<double>> reference_step(const cases::Case& single, cases::Op op,
                                                  const std::map<std::string, Tensor>& data,
                                                  const train::Tensors<double>& params) {
  std::map<std::string, std::vector<double>> mem;
  ops::Views views;
  const auto table = single.tensors(op);
  for (const auto& t : table) {
    auto& v = mem[t.name];
    v.assign(static_cast<std::size_t>(shape_numel(t.shape)), 0.0);
    if (t.role != cases::Role::input) continue;
    if (auto p = params.find(t.name); p != params.end()) {
      v = p->second;
    } else {
      const Tensor& src = data.at(t.name);
      for (std::int64_t i = 0; i < src.numel(); ++i) v[static_cast<std::size_t>(i)] = src.get(i);
    }
  }
  for (const auto& t : table)
    if (t.role != cases::Role::loss) views[t.name] = ops::dense_view(mem[t.name], t.shape);
  ops::ReferenceOptions opt;
  opt.threads = 2;
  opt.loss_on = DType::float64;
  train::StepOutcome<double> o;
  o.loss = ops::find(op).reference(single.find(op)->params, views, opt);
  for (const auto& [name, p] : params) o.grads["grad_" + name] = mem.at("grad_" + name);
  return o;
}

train::Trajectory<double> reference_trajectory(const cases::Case& c, cases::Op op) {
  cases::Case single = c;
  single.train.reset();
  const auto step0 = batch(c, op, 0);
  train::Tensors<double> params;
  for (const auto& t : c.parameters(op)) {
    const Tensor& src = step0.at(t.name);
    auto& v = params[t.name];
    for (std::int64_t i = 0; i < src.numel(); ++i) v.push_back(src.get(i));
  }
  train::StepFunction<double> fn = [&](std::int64_t s, const train::Tensors<double>& p) {
    return reference_step(single, op, batch(c, op, s), p);
  };
  auto r = train::run_trajectory<double>(*c.train, params, fn);
  EXPECT_TRUE(r) << r.message();
  return r ? *r : train::Trajectory<double>{};
}

std::vector<OpResult> run_training(const CudnnOptions& o, const layout::LayoutSet& ls,
                                   const cases::Case& c, cases::Op op,
                                   const std::map<std::string, Tensor>& step0) {
  auto r = make_cudnn_runner(o, ls);
  EXPECT_TRUE(r) << r.message();
  if (!r) return {};
  const Status st = (*r)->prepare();
  EXPECT_TRUE(st) << st.message();
  OpTask task;
  task.c = &c;
  task.op = op;
  for (const auto& [name, t] : step0) task.inputs[name] = &t;
  task.step_inputs = [&c, op](std::int64_t s) { return batch(c, op, s); };
  return (*r)->run(task);
}

// The device trajectory within the float64 one: the loss curve inside the trajectory gate at
// every step (the float32 single-step gate 1e-6, growing as sqrt(1 + step)), every checkpoint's
// parameters and gradients close, and the parameters visibly moved (a no-op update fails).
void expect_trajectory(const OpResult& r, const cases::Case& c, cases::Op op,
                       const std::string& what) {
  ASSERT_EQ(r.outcome, RunOutcome::ok) << what << ": " << r.message << "\n" << r.info.dump(1);
  ASSERT_TRUE(r.info.contains("training")) << what;
  const auto ref = reference_trajectory(c, op);
  ASSERT_EQ(ref.losses.size(), static_cast<std::size_t>(c.train->steps));
  const Tensor& curve = r.outputs.at(train::kLossCurve);
  ASSERT_EQ(curve.shape(), Shape{c.train->steps});
  std::vector<double> run;
  for (std::int64_t s = 0; s < curve.numel(); ++s) run.push_back(curve.get(s));
  const auto div = train::classify_divergence(train::relative_errors(run, ref.losses), 1e-6);
  EXPECT_EQ(div.kind, train::Divergence::Kind::none) << what << ": " << div.sentence();
  for (const auto& cp : ref.checkpoints) {
    for (const auto& [name, want] : cp.params) {
      const std::string key = train::checkpoint_tensor(cp.step, name);
      ASSERT_TRUE(r.outputs.count(key)) << what << ": no " << key;
      EXPECT_LE(testing_gpu::relative_error(r.outputs.at(key), want), 2e-5) << what << " " << key;
    }
    for (const auto& [name, want] : cp.grads) {
      const std::string key = train::checkpoint_tensor(cp.step, name);
      ASSERT_TRUE(r.outputs.count(key)) << what << ": no " << key;
      EXPECT_LE(testing_gpu::relative_error(r.outputs.at(key), want), 1e-4) << what << " " << key;
    }
  }
  // The last checkpoint's parameters are far from the first's: the comparison above could not
  // pass with an update that did nothing.
  const auto& first = ref.checkpoints.front().params;
  const std::int64_t last = ref.checkpoints.back().step;
  for (const auto& [name, w0] : first)
    EXPECT_GT(testing_gpu::relative_error(r.outputs.at(train::checkpoint_tensor(last, name)), w0),
              1e-3)
        << what << " " << name << " did not move";
}

struct Preset {
  const char* name;
  const char* conv_mode;
};

class CudnnTrainConv : public ::testing::TestWithParam<Preset> {};

TEST_P(CudnnTrainConv, TrajectoryMatchesFloat64) {
  VALIDATE_REQUIRE_GPU();
  const auto c = conv_case();
  const auto step0 = batch(c, cases::Op::conv2d, 0);
  CudnnOptions o;
  o.conv_mode = GetParam().conv_mode;
  auto results =
      run_training(o, *layout::load_layout(GetParam().name), c, cases::Op::conv2d, step0);
  ASSERT_EQ(results.size(), 1u);
  expect_trajectory(results[0], c, cases::Op::conv2d, GetParam().name);
  if (std::string(GetParam().name) == "channels_last") {
    // The NHWC filter: cuDNN reads and writes KRSC, and the update ran on those bytes.
    EXPECT_EQ(results[0].info["descriptors"]["weight"]["cudnn_filter_format"], "NHWC (KRSC)");
    EXPECT_EQ(results[0].info["training"]["update_layout"], "OHWI");
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, CudnnTrainConv,
                         ::testing::Values(Preset{"torch", "xcorr"},
                                           Preset{"channels_last", "xcorr"},
                                           Preset{"fortran", "conv"}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(CudnnTrain, MatmulTrajectoryMatchesFloat64InEveryGradLayout) {
  VALIDATE_REQUIRE_GPU();
  const auto c = matmul_case();
  const auto step0 = batch(c, cases::Op::matmul, 0);
  auto same = *layout::load_layout("torch");
  auto results = run_training({}, same, c, cases::Op::matmul, step0);
  ASSERT_EQ(results.size(), 1u);
  expect_trajectory(results[0], c, cases::Op::matmul, "torch");
  EXPECT_EQ(results[0].info["training"]["grad_B"], "used as written (B's layout)");

  // grad_B column-major while B is row-major: dB is converted to B's layout before the update.
  auto mixed = same;
  mixed.ops["matmul"]["grad_B"] = *layout::parse_spec("KN:F", "KN");
  results = run_training({}, mixed, c, cases::Op::matmul, step0);
  ASSERT_EQ(results.size(), 1u);
  expect_trajectory(results[0], c, cases::Op::matmul, "grad_B KN:F");
  EXPECT_EQ(results[0].info["training"]["grad_B"], "converted to B's layout before the update");
}

// Adam (torch.optim.Adam's update, gpu::adam_update) in the three presets, and conv_transpose2d's
// trajectory (SGD with momentum), against the float64 trajectory of the same loop.
TEST(CudnnTrain, AdamAndConvTransposeTrajectoriesMatchFloat64) {
  VALIDATE_REQUIRE_GPU();
  auto c = conv_case();
  c.train->optimizer = train::Optimizer::adam;
  c.train->momentum = 0;
  c.train->lr = 1e-2;
  c.train->weight_decay = 1e-2;
  const auto step0 = batch(c, cases::Op::conv2d, 0);
  for (const auto& p :
       {Preset{"torch", "xcorr"}, Preset{"channels_last", "xcorr"}, Preset{"fortran", "conv"}}) {
    CudnnOptions o;
    o.conv_mode = p.conv_mode;
    auto results = run_training(o, *layout::load_layout(p.name), c, cases::Op::conv2d, step0);
    ASSERT_EQ(results.size(), 1u);
    expect_trajectory(results[0], c, cases::Op::conv2d, std::string("adam/") + p.name);
    EXPECT_EQ(results[0].info["training"]["optimizer"], "adam");
  }
  cases::Case t;
  t.name = "train_ct";
  t.dtype = DType::float32;
  auto& tp = t.params<ops::ConvTransposeParams>();
  tp.n = 2, tp.c = 4, tp.h = 5, tp.w = 7, tp.o = 6, tp.kh = 2, tp.kw = 5;
  tp.stride = {2, 2}, tp.padding = {1, 2}, tp.output_padding = {1, 1}, tp.dilation = {1, 2};
  tp.groups = 2, tp.bias = true;
  t.train = config();
  const auto t0 = batch(t, cases::Op::conv_transpose2d, 0);
  for (const char* preset : {"torch", "channels_last", "fortran"}) {
    auto results =
        run_training({}, *layout::load_layout(preset), t, cases::Op::conv_transpose2d, t0);
    ASSERT_EQ(results.size(), 1u);
    expect_trajectory(results[0], t, cases::Op::conv_transpose2d,
                      std::string("conv_transpose2d/") + preset);
  }
}

// Mixed precision: bfloat16 and float16 parameters with float32 masters. The checkpoints are the
// masters, float32 and off the narrow grid once an update moved them (a master kept in the case
// dtype would sit on it); the loss curve follows the float64 trajectory to within the narrow
// dtype's rounding.
TEST(CudnnTrain, MixedPrecisionKeepsFloat32Masters) {
  VALIDATE_REQUIRE_GPU();
  for (DType dt : {DType::bfloat16, DType::float16})
    for (auto opt : {train::Optimizer::sgd, train::Optimizer::adam}) {
      auto c = conv_case();
      c.dtype = dt;
      c.train->optimizer = opt;
      if (opt == train::Optimizer::adam) c.train->momentum = 0, c.train->lr = 1e-2;
      const std::string what = std::string(dtype_name(dt)) + "/" + train::optimizer_name(opt);
      const auto step0 = batch(c, cases::Op::conv2d, 0);
      auto results =
          run_training({}, *layout::load_layout("channels_last"), c, cases::Op::conv2d, step0);
      ASSERT_EQ(results.size(), 1u);
      const OpResult& r = results[0];
      ASSERT_EQ(r.outcome, RunOutcome::ok) << what << ": " << r.message;
      const Tensor& w1 = r.outputs.at(train::checkpoint_tensor(1, "weight"));
      EXPECT_EQ(w1.dtype(), DType::float32) << what;
      std::int64_t off_grid = 0;
      for (std::int64_t i = 0; i < w1.numel(); ++i) {
        const float v = static_cast<float>(w1.get(i));
        off_grid += round_to_dtype(v, dt) != v;
      }
      EXPECT_GT(off_grid, w1.numel() / 2) << what << ": the master looks narrowed";
      const auto ref = reference_trajectory(c, cases::Op::conv2d);
      const Tensor& curve = r.outputs.at(train::kLossCurve);
      for (std::int64_t s = 0; s < curve.numel(); ++s)
        EXPECT_NEAR(curve.get(s), ref.losses[static_cast<std::size_t>(s)],
                    5e-2 * std::abs(ref.losses[static_cast<std::size_t>(s)]))
            << what << " step " << s;
    }
}

// What the device does not train is an explicit `unsupported` with the reason, never the
// single-step results alone (which would leave every trajectory tensor silently missing).
TEST(CudnnTrain, WhatIsNotTrainedIsUnsupported) {
  VALIDATE_REQUIRE_GPU();
  auto c = conv_case();
  c.dtype = DType::float64;
  const auto step0 = batch(c, cases::Op::conv2d, 0);
  auto results = run_training({}, *layout::load_layout("torch"), c, cases::Op::conv2d, step0);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, RunOutcome::unsupported);
  EXPECT_NE(results[0].message.find("float32, bfloat16 and float16"), std::string::npos)
      << results[0].message;

  // A training case without the later batches is an error, not a one-step trajectory.
  const auto f = conv_case();
  const auto in = batch(f, cases::Op::conv2d, 0);
  auto r = make_cudnn_runner({}, *layout::load_layout("torch"));
  ASSERT_TRUE(r);
  ASSERT_TRUE((*r)->prepare());
  OpTask task;
  task.c = &f;
  task.op = cases::Op::conv2d;
  for (const auto& [name, t] : in) task.inputs[name] = &t;
  auto v = (*r)->run(task);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].outcome, RunOutcome::error);
  EXPECT_NE(v[0].message.find("training step 1"), std::string::npos) << v[0].message;
  EXPECT_TRUE(v[0].outputs.empty());
}

}  // namespace
}  // namespace validate::runners
