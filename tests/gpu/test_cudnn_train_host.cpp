// The host side of the cuDNN runner's training trajectory, checked on the CPU (no device):
// - the SGD element function the device kernel runs (harness/gpu/src/sgd_element.hpp) against
//   train::sgd_step<float>, bit for bit, over several steps of every optimizer option;
// - the device trajectory loop (device_trajectory.hpp) driven by a host stepper (a small matmul
//   model updated with that same element function) against train::run_trajectory<float>, the loop
//   every stack is held to: loss curve, checkpoint names and contents, the order of the calls;
// - plan_training's refusals and check_training_outputs' naming of a missing or mis-shaped tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "adam_element.hpp"
#include "conv_case.hpp"
#include "device_param.hpp"
#include "device_trajectory.hpp"
#include "sgd_element.hpp"
#include "validate/core/rng.hpp"
#include "validate/layout/layout.hpp"
#include "validate/train/adam.hpp"
#include "validate/train/sgd.hpp"
#include "validate/train/tensor_names.hpp"
#include "validate/train/trajectory.hpp"

namespace validate::runners::cudnn_detail {
namespace {

std::vector<float> normal(std::size_t n, const std::string& key, float scale = 1.f) {
  std::vector<float> v(n);
  Philox(11, "train_host", "x", key).fill_normal(v.data(), n, scale);
  return v;
}

std::vector<train::TrainConfig> configs() {
  std::vector<train::TrainConfig> out;
  train::TrainConfig c;
  c.steps = 7;
  c.checkpoint_every = 3;
  c.lr = 0.1;
  out.push_back(c);  // plain SGD
  c.momentum = 0.9, c.weight_decay = 1e-2, c.dampening = 0.1;
  out.push_back(c);  // momentum with dampening and weight decay
  c.dampening = 0, c.nesterov = true, c.momentum = 0.8, c.weight_decay = 1e-3, c.lr = 0.05;
  out.push_back(c);  // Nesterov
  return out;
}

gpu::SgdHyper hyper(const train::TrainConfig& c) {
  return gpu::sgd_hyper(c.lr, c.momentum, c.dampening, c.weight_decay, c.nesterov);
}

TEST(CudnnTrainHost, SgdElementMatchesSgdStepBitForBit) {
  for (const auto& c : configs()) {
    const std::size_t n = 257;
    std::vector<float> p_ref = normal(n, "p"), p_dev = p_ref, mom(n, -1.f);
    train::SgdState<float> state;
    const gpu::SgdHyper h = hyper(c);
    for (int s = 0; s < 5; ++s) {
      const std::vector<float> g = normal(n, "g" + std::to_string(s));
      train::sgd_step(p_ref.data(), g.data(), n, state, c);
      for (std::size_t i = 0; i < n; ++i)
        gpu::kernels::sgd_element(p_dev[i], g[i], mom[i], s == 0, h);
      ASSERT_EQ(std::memcmp(p_ref.data(), p_dev.data(), n * sizeof(float)), 0)
          << "step " << s << " momentum " << c.momentum << " nesterov " << c.nesterov;
      if (c.momentum != 0) {
        ASSERT_EQ(std::memcmp(state.momentum.data(), mom.data(), n * sizeof(float)), 0);
      }
    }
    // The update moved the parameters (a test of a no-op would pass too).
    EXPECT_NE(p_dev, normal(n, "p"));
  }
}

// Weight decay applied after the momentum (a classic port mistake) parts from sgd_step at step 1:
// the comparison above is sensitive to the order, not only to the values.
TEST(CudnnTrainHost, WeightDecayAfterMomentumIsDetected) {
  train::TrainConfig c = configs()[1];
  const std::size_t n = 64;
  std::vector<float> p_ref = normal(n, "p"), p_bad = p_ref, mom(n);
  train::SgdState<float> state;
  gpu::SgdHyper h = hyper(c), no_wd = h;
  no_wd.use_weight_decay = false;
  for (int s = 0; s < 2; ++s) {
    const std::vector<float> g = normal(n, "g" + std::to_string(s));
    train::sgd_step(p_ref.data(), g.data(), n, state, c);
    for (std::size_t i = 0; i < n; ++i) {
      const float p0 = p_bad[i];
      gpu::kernels::sgd_element(p_bad[i], g[i], mom[i], s == 0, no_wd);
      p_bad[i] -= h.lr * h.weight_decay * p0;
    }
  }
  EXPECT_NE(std::memcmp(p_ref.data(), p_bad.data(), n * sizeof(float)), 0);
}

// A host model of one op (Y = A·B, MSE loss against T, dB = Aᵀ·(2/n)(Y - T)), each step's A and T
// drawn by step: the device loop and train::run_trajectory<float> both drive it.
struct HostModel {
  std::int64_t m = 3, k = 5, n = 4;
  std::vector<float> batch(const char* what, std::int64_t step) const {
    return normal(static_cast<std::size_t>(what[0] == 'A' ? m * k : m * n),
                  std::string(what) + std::to_string(step));
  }
  // Returns the loss; writes dB.
  float loss_and_grad(std::int64_t step, const std::vector<float>& B,
                      std::vector<float>& dB) const {
    const auto A = batch("A", step), T = batch("T", step);
    std::vector<float> d(static_cast<std::size_t>(m * n));
    float loss = 0;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        float y = 0;
        for (std::int64_t q = 0; q < k; ++q)
          y += A[static_cast<std::size_t>(i * k + q)] * B[static_cast<std::size_t>(q * n + j)];
        const float e = y - T[static_cast<std::size_t>(i * n + j)];
        loss += e * e;
        d[static_cast<std::size_t>(i * n + j)] = (2.f / static_cast<float>(m * n)) * e;
      }
    dB.assign(static_cast<std::size_t>(k * n), 0.f);
    for (std::int64_t q = 0; q < k; ++q)
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t i = 0; i < m; ++i)
          dB[static_cast<std::size_t>(q * n + j)] +=
              A[static_cast<std::size_t>(i * k + q)] * d[static_cast<std::size_t>(i * n + j)];
    return loss / static_cast<float>(m * n);
  }
};

cases::Case matmul_case(const HostModel& hm, const train::TrainConfig& c) {
  cases::Case cs;
  cs.name = "t";
  cs.dtype = DType::float32;
  cs.params<cases::MatmulParams>() = {hm.m, hm.k, hm.n};
  cs.train = c;
  return cs;
}

Tensor tensor(const std::vector<float>& v, const Shape& s) {
  Tensor t(DType::float32, s);
  std::memcpy(t.bytes(), v.data(), v.size() * sizeof(float));
  return t;
}

TEST(CudnnTrainHost, DeviceLoopMatchesRunTrajectory) {
  const HostModel hm;
  const Shape bs{hm.k, hm.n};
  const std::vector<float> B0 = normal(static_cast<std::size_t>(hm.k * hm.n), "B0", 0.5f);
  for (const auto& c : configs()) {
    const cases::Case cs = matmul_case(hm, c);
    auto plan = plan_training(cs, cases::Op::matmul);
    ASSERT_TRUE(plan) << plan.message();
    ASSERT_EQ(plan->params, std::vector<std::string>{"B"});
    ASSERT_EQ(plan->checkpoints, (std::vector<std::int64_t>{0, 1, 2, 3, 6}));

    // The reference loop.
    train::StepFunction<float> fn =
        [&](std::int64_t s, const train::Tensors<float>& p) -> Result<train::StepOutcome<float>> {
      train::StepOutcome<float> o;
      o.loss = hm.loss_and_grad(s, p.at("B"), o.grads["grad_B"]);
      return o;
    };
    auto ref = train::run_trajectory<float>(c, {{"B", B0}}, fn);
    ASSERT_TRUE(ref) << ref.message();

    // The device loop with a host stepper; the calls are logged.
    std::vector<float> B, dB, mom(B0.size());
    std::int64_t step = -1;
    std::string log;
    const gpu::SgdHyper h = hyper(c);
    FunctionStepper st;
    st.load = [&](std::int64_t s) -> Status {
      step = s;
      if (s == 0) B = B0;
      log += "L" + std::to_string(s);
      return Status::ok();
    };
    st.pass = [&]() -> Result<float> {
      log += "P";
      return hm.loss_and_grad(step, B, dB);
    };
    st.read = [&]() -> Result<std::map<std::string, Tensor>> {
      log += "R";
      std::map<std::string, Tensor> m;
      m.emplace("B", tensor(B, bs));
      m.emplace("grad_B", tensor(dB, bs));
      return m;
    };
    st.step = [&](bool first) -> Status {
      log += first ? "U!" : "U";
      for (std::size_t i = 0; i < B.size(); ++i)
        gpu::kernels::sgd_element(B[i], dB[i], mom[i], first, h);
      return Status::ok();
    };
    auto out = run_device_trajectory(*plan, st);
    ASSERT_TRUE(out) << out.message();
    EXPECT_EQ(log, "L0PRU!L1PRUL2PRUL3PRUL4PUL5PUL6PRU");  // readbacks (R) at the checkpoints 0, 1, 2, 3, 6

    const Tensor& curve = out->at(train::kLossCurve);
    ASSERT_EQ(curve.shape(), Shape{c.steps});
    for (std::int64_t s = 0; s < c.steps; ++s)
      EXPECT_EQ(curve.data<float>()[s],
                static_cast<float>(ref->losses[static_cast<std::size_t>(s)]))
          << s;
    ASSERT_EQ(ref->checkpoints.size(), plan->checkpoints.size());
    for (const auto& cp : ref->checkpoints) {
      for (const auto& [name, want] : std::map<std::string, std::vector<float>>{
               {"B", cp.params.at("B")}, {"grad_B", cp.grads.at("grad_B")}}) {
        const std::string key = train::checkpoint_tensor(cp.step, name);
        ASSERT_TRUE(out->count(key)) << key;
        ASSERT_EQ(out->at(key).shape(), bs);
        EXPECT_EQ(std::memcmp(out->at(key).bytes(), want.data(), want.size() * sizeof(float)), 0)
            << key;
      }
    }
    // Checkpoint 1 holds the parameters after one update: not the initial ones.
    EXPECT_NE(std::memcmp(out->at("step1_B").bytes(), B0.data(), B0.size() * sizeof(float)), 0);
    // Everything the case's tensor table lists for training is there.
    EXPECT_TRUE(check_training_outputs(cs, cases::Op::matmul, *out));
    EXPECT_EQ(out->size(), 1 + 2 * plan->checkpoints.size());
  }
}

TEST(CudnnTrainHost, DivergenceAndStepFailuresNameTheStep) {
  const HostModel hm;
  train::TrainConfig c = configs()[0];
  auto plan = plan_training(matmul_case(hm, c), cases::Op::matmul);
  ASSERT_TRUE(plan);
  FunctionStepper st;
  std::int64_t step = 0;
  st.load = [&](std::int64_t s) -> Status {
    step = s;
    return Status::ok();
  };
  st.pass = [&]() -> Result<float> { return step == 4 ? NAN : 1.f; };
  st.read = [&]() -> Result<std::map<std::string, Tensor>> {
    std::map<std::string, Tensor> m;
    m.emplace("B", Tensor(DType::float32, Shape{hm.k, hm.n}));
    m.emplace("grad_B", Tensor(DType::float32, Shape{hm.k, hm.n}));
    return m;
  };
  st.step = [](bool) { return Status::ok(); };
  auto out = run_device_trajectory(*plan, st);
  ASSERT_FALSE(out);
  EXPECT_NE(out.message().find("training step 4"), std::string::npos) << out.message();
  EXPECT_NE(out.message().find("diverged"), std::string::npos) << out.message();

  st.pass = [&]() -> Result<float> { return 1.f; };
  st.step = [&](bool) -> Status {
    return step == 2 ? Status(Error{"kernel refused"}) : Status::ok();
  };
  out = run_device_trajectory(*plan, st);
  ASSERT_FALSE(out);
  EXPECT_NE(out.message().find("training step 2: the optimizer update: kernel refused"),
            std::string::npos)
      << out.message();

  // A stepper that reads back no gradient: an error, never a checkpoint left out.
  st.step = [](bool) { return Status::ok(); };
  st.read = [&]() -> Result<std::map<std::string, Tensor>> {
    std::map<std::string, Tensor> m;
    m.emplace("B", Tensor(DType::float32, Shape{hm.k, hm.n}));
    return m;
  };
  out = run_device_trajectory(*plan, st);
  ASSERT_FALSE(out);
  EXPECT_NE(out.message().find("no grad_B"), std::string::npos) << out.message();
}

// The Adam element the device kernel runs, against train::adam_step<float> (torch.optim.Adam's
// order and roundings), bit for bit over 6 steps (the bias corrections change every step), with
// and without weight decay, on gradients spanning 1e-6 to 1e1.
TEST(CudnnTrainHost, AdamElementMatchesAdamStepBitForBit) {
  for (double wd : {0.0, 1e-2})
    for (double lr : {1e-3, 5e-2}) {
      train::TrainConfig c;
      c.optimizer = train::Optimizer::adam;
      c.lr = lr;
      c.weight_decay = wd;
      c.beta1 = 0.8, c.beta2 = 0.99, c.eps = 1e-6;
      const std::size_t n = 301;
      std::vector<float> p_ref = normal(n, "p"), p_dev = p_ref, m(n, 0.f), v(n, 0.f);
      train::AdamState<float> state;
      int moved = 0;
      for (int s = 1; s <= 6; ++s) {
        std::vector<float> g = normal(n, "g" + std::to_string(s));
        for (std::size_t i = 0; i < n; ++i) g[i] *= std::pow(10.f, static_cast<float>(i % 8) - 6.f);
        train::adam_step(p_ref.data(), g.data(), n, state, c);
        const gpu::AdamHyper h = gpu::adam_hyper(c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, s);
        for (std::size_t i = 0; i < n; ++i)
          gpu::kernels::adam_element(p_dev[i], g[i], m[i], v[i], h);
        for (std::size_t i = 0; i < n; ++i) {
          ASSERT_EQ(std::memcmp(&p_ref[i], &p_dev[i], sizeof(float)), 0)
              << "step " << s << " element " << i << ": " << p_ref[i] << " vs " << p_dev[i];
          ASSERT_EQ(std::memcmp(&state.m[i], &m[i], sizeof(float)), 0) << "m, step " << s;
          ASSERT_EQ(std::memcmp(&state.v[i], &v[i], sizeof(float)), 0) << "v, step " << s;
        }
        moved += p_dev[0] != normal(n, "p")[0];
      }
      EXPECT_GT(moved, 0);
    }
}

// The per-step constants: t counted from 1, the corrections computed in double then rounded.
TEST(CudnnTrainHost, AdamHyperFollowsTheStep) {
  const gpu::AdamHyper h1 = gpu::adam_hyper(1e-3, 0.9, 0.999, 1e-8, 0, 1);
  EXPECT_EQ(h1.step_size, static_cast<float>(1e-3 / (1 - 0.9)));
  EXPECT_EQ(h1.bc2_sqrt, static_cast<float>(std::sqrt(1 - 0.999)));
  EXPECT_FALSE(h1.use_weight_decay);
  const gpu::AdamHyper h3 = gpu::adam_hyper(1e-3, 0.9, 0.999, 1e-8, 1e-2, 3);
  EXPECT_EQ(h3.step_size, static_cast<float>(1e-3 / (1 - 0.9 * 0.9 * 0.9)));
  EXPECT_EQ(h3.bc2_sqrt, static_cast<float>(std::sqrt(1 - 0.999 * 0.999 * 0.999)));
  EXPECT_TRUE(h3.use_weight_decay);
  EXPECT_EQ(h3.keep2, static_cast<float>(1 - 0.999));
}

TEST(CudnnTrainHost, DeviceUpdateNamesTheRecipe) {
  train::TrainConfig c;
  auto f = device_update_name(c, DType::float32);
  ASSERT_TRUE(f);
  EXPECT_NE(f->find("gpu::sgd_update, float32"), std::string::npos) << *f;
  c.optimizer = train::Optimizer::adam;
  auto b = device_update_name(c, DType::bfloat16);
  ASSERT_TRUE(b);
  EXPECT_NE(b->find("gpu::adam_update, mixed precision: float32 master"), std::string::npos) << *b;
  EXPECT_FALSE(device_update_name(c, DType::float64));
}

TEST(CudnnTrainHost, PlanTrainingRefusesWhatTheDeviceDoesNotTrain) {
  const HostModel hm;
  cases::Case cs = matmul_case(hm, configs()[0]);
  cs.train.reset();
  EXPECT_FALSE(plan_training(cs, cases::Op::matmul));
  cs.train = configs()[0];
  cs.dtype = DType::float64;
  auto p = plan_training(cs, cases::Op::matmul);
  ASSERT_FALSE(p);
  EXPECT_NE(p.message().find("float32, bfloat16 and float16, not float64"), std::string::npos)
      << p.message();
  // bfloat16 and float16 train in mixed precision, Adam as well as SGD.
  for (DType dt : {DType::bfloat16, DType::float16}) {
    cs.dtype = dt;
    cs.train->optimizer = train::Optimizer::adam;
    auto mixed = plan_training(cs, cases::Op::matmul);
    ASSERT_TRUE(mixed) << mixed.message();
    EXPECT_EQ(mixed->params, std::vector<std::string>{"B"});
  }

  // conv2d: weight and bias, or weight alone.
  cases::Case conv;
  conv.name = "c";
  conv.dtype = DType::float32;
  auto& cp = conv.params<cases::ConvParams>();
  cp.n = 2, cp.c = 3, cp.h = 5, cp.w = 6, cp.o = 4, cp.kh = 3, cp.kw = 2, cp.bias = true;
  conv.train = configs()[1];
  auto withb = plan_training(conv, cases::Op::conv2d);
  ASSERT_TRUE(withb) << withb.message();
  EXPECT_EQ(withb->params, (std::vector<std::string>{"weight", "bias"}));
  conv.params<cases::ConvParams>().bias = false;
  auto nob = plan_training(conv, cases::Op::conv2d);
  ASSERT_TRUE(nob);
  EXPECT_EQ(nob->params, std::vector<std::string>{"weight"});
}

std::map<std::string, Tensor> clone(const std::map<std::string, Tensor>& m) {
  std::map<std::string, Tensor> out;
  for (const auto& [k, v] : m) out.emplace(k, v.clone());
  return out;
}

TEST(CudnnTrainHost, CheckTrainingOutputsNamesWhatIsMissingOrWrong) {
  const HostModel hm;
  const train::TrainConfig c = configs()[0];
  const cases::Case cs = matmul_case(hm, c);
  std::map<std::string, Tensor> out;
  out.emplace("train_loss", Tensor(DType::float32, Shape{c.steps}));
  for (std::int64_t k : train::checkpoint_steps(c))
    for (const char* t : {"B", "grad_B"})
      out.emplace(train::checkpoint_tensor(k, t), Tensor(DType::float32, Shape{hm.k, hm.n}));
  ASSERT_TRUE(check_training_outputs(cs, cases::Op::matmul, out));

  auto missing = clone(out);
  missing.erase("step6_grad_B");
  Status st = check_training_outputs(cs, cases::Op::matmul, missing);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("step6_grad_B"), std::string::npos) << st.message();

  auto transposed = clone(out);
  transposed.insert_or_assign("step3_B", Tensor(DType::float32, Shape{hm.n, hm.k}));
  st = check_training_outputs(cs, cases::Op::matmul, transposed);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("step3_B"), std::string::npos) << st.message();

  auto short_curve = clone(out);
  short_curve.insert_or_assign("train_loss", Tensor(DType::float32, Shape{c.steps - 1}));
  EXPECT_FALSE(check_training_outputs(cs, cases::Op::matmul, short_curve));

  auto wrong_dtype = clone(out);
  wrong_dtype.insert_or_assign("step0_B", Tensor(DType::float16, Shape{hm.k, hm.n}));
  EXPECT_FALSE(check_training_outputs(cs, cases::Op::matmul, wrong_dtype));
}

// The conv2d update combines the filter buffer cuDNN reads with the dW it writes element by element
// (ConvCase::sgd refuses otherwise). Both come from the filter plan: for every preset's weight
// layout and a few others, native and after the NCHW fallback, they must be one memory layout —
// KRSC with KRSC for the NHWC filter, KCRS with KCRS, the flip kept in both — or the device
// trajectory would refuse to train them.
TEST(CudnnTrainHost, FilterBufferAndDwShareOneLayoutInEveryPreset) {
  const Shape ws{5, 3, 4, 2};  // O, I, H, W: all different
  std::vector<layout::Spec> specs;
  for (const auto& name : layout::preset_names())
    specs.push_back(*layout::load_layout(name)->find("conv2d", "weight"));
  for (const char* s : {"HWIO", "IOHW", "OHWI+flip=HW", "HWIO:F+flip=HW", "OIHW+flip=O"})
    specs.push_back(*layout::parse_spec(s, "OIHW"));
  for (const auto& spec : specs)
    for (bool convert : {false, true}) {
      const FilterPlan f = plan_filter(spec, ws, convert);
      EXPECT_TRUE(same_memory(f.stack, cudnn_grad_weight_spec(f, spec), "OIHW", ws))
          << layout::to_string(spec) << (convert ? " converted" : " as given");
    }
  // channels_last: the NHWC filter, KRSC bytes, updated in place.
  const auto cl = *layout::load_layout("channels_last")->find("conv2d", "weight");
  const FilterPlan f = plan_filter(cl, ws, false);
  EXPECT_EQ(f.format, CUDNN_TENSOR_NHWC);
  EXPECT_EQ(layout::to_string(f.stack), "OHWI");
  // same_memory tells the layouts apart: a KRSC dW against a KCRS buffer, or a lost flip.
  const auto oihw = *layout::parse_spec("OIHW", "OIHW");
  EXPECT_FALSE(same_memory(oihw, *layout::parse_spec("OHWI", "OIHW"), "OIHW", ws));
  EXPECT_FALSE(same_memory(oihw, *layout::parse_spec("OIHW+flip=HW", "OIHW"), "OIHW", ws));
  EXPECT_TRUE(same_memory(oihw, *layout::parse_spec("WHIO:F", "OIHW"), "OIHW", ws));
}

}  // namespace
}  // namespace validate::runners::cudnn_detail
