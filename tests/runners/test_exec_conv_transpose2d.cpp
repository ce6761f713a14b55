// The exec protocol for conv_transpose2d, end to end: a numpy program (examples/numpy/
// conv_transpose2d_runner.py, an independent scatter-form implementation) reads the protocol's
// environment (VALIDATE_OPH/OPW included) and .bin files and writes every result; they must agree
// with the float64 oracle rounded to float32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/temp_dir.hpp"
#include "runners/runner_test_util.hpp"
#include "validate/cases/case_file.hpp"
#include "validate/core/json_io.hpp"
#include "validate/layout/preset.hpp"
#include "validate/backends/exec_runner.hpp"
#include "validate/backends/oracle_runner.hpp"
#include "validate/train/schedule.hpp"

using namespace validate;

TEST(ExecConvTranspose2d, NumpyProgramAgreesWithTheOracleThroughTheProtocol) {
  if (std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) GTEST_SKIP() << "python3 with numpy missing";
  auto f = cases::load_case_file(std::string(VALIDATE_SOURCE_DIR) + "/cases/conv_transpose2d.json");
  ASSERT_TRUE(f) << f.message();
  validate::testing::TempDir tmp{"exec_ct"};
  auto set = layout::load_layout("torch");
  ASSERT_TRUE(set);
  const std::string cmd =
      std::string("/usr/bin/python3 ") + VALIDATE_SOURCE_DIR + "/examples/numpy/conv_transpose2d_runner.py {dir}";
  auto r = runners::make_exec_runner({cmd, 60, true, {}}, *set);
  ASSERT_TRUE(r->prepare().is_ok());
  for (const auto& c : f->cases) {
    const auto in = validate::testing::make_inputs(c, cases::Op::conv_transpose2d, 21);
    const std::string dir = tmp / c.name;
    auto res = r->run(validate::testing::make_task(c, cases::Op::conv_transpose2d, in, dir));
    ASSERT_EQ(res.size(), 1u);
    ASSERT_EQ(res[0].outcome, runners::RunOutcome::ok) << res[0].message;
    // The protocol's environment and case.json carry the op's own parameters.
    auto doc = read_json(dir + "/case.json");
    ASSERT_TRUE(doc);
    const auto& p = c.params<cases::ConvTransposeParams>();
    EXPECT_EQ((*doc)["op"], "conv_transpose2d");
    EXPECT_EQ((*doc)["params"]["output_padding"], Json::array({p.output_padding[0], p.output_padding[1]}));
    EXPECT_EQ((*doc)["params"]["Hout"], p.hout());
    EXPECT_EQ((*doc)["tensors"]["weight"]["shape"], Json::array({p.c, p.o / p.groups, p.kh, p.kw}));
    auto want = runners::oracle_compute(c, cases::Op::conv_transpose2d, in.view(), {}, DType::float32, 2);
    ASSERT_TRUE(want) << want.message();
    for (const auto& [name, t] : *want) {
      auto it = res[0].outputs.find(name);
      ASSERT_NE(it, res[0].outputs.end()) << name;
      ASSERT_EQ(it->second.shape(), t.shape()) << name;
      double worst = 0, scale = 0;
      for (std::int64_t i = 0; i < t.numel(); ++i) {
        worst = std::max(worst, std::fabs(it->second.get(i) - t.get(i)));
        scale = std::max(scale, std::fabs(t.get(i)));
      }
      EXPECT_GT(scale, 0) << c.name << " " << name;
      EXPECT_LE(worst, 1e-5 * scale) << c.name << " " << name;
    }
  }
}

// Protocol 2 for conv_transpose2d: the numpy program trains (float32 SGD with momentum, dampening
// and weight decay) on the batches the harness hands it in steps/<s>/, and its loss curve and
// checkpoints agree with the float64 oracle's trajectory on the same batches. Float32 against
// float64 over 8 steps drifts by ~1e-7 relative; the parameters move by > 1e-2, so 1e-4 of the
// largest value separates a right trajectory from a wrong update.
TEST(ExecConvTranspose2d, NumpyTrajectoryAgreesWithTheOracleThroughProtocol2) {
  if (std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) GTEST_SKIP() << "python3 with numpy missing";
  auto f = cases::load_case_file(std::string(VALIDATE_SOURCE_DIR) + "/cases/conv_transpose2d.json");
  ASSERT_TRUE(f) << f.message();
  validate::testing::TempDir tmp{"exec_ct_train"};
  auto set = layout::load_layout("torch");
  ASSERT_TRUE(set);
  const std::string cmd =
      std::string("/usr/bin/python3 ") + VALIDATE_SOURCE_DIR + "/examples/numpy/conv_transpose2d_runner.py {dir}";
  auto r = runners::make_exec_runner({cmd, 60, false, {}}, *set);
  ASSERT_TRUE(r->prepare().is_ok());
  int checked = 0;
  for (auto c : f->cases) {
    if (c.dtype != DType::float32) continue;
    train::TrainConfig t;
    t.steps = 8;
    t.lr = 0.05;
    t.momentum = 0.9;
    t.dampening = 0.2;
    t.weight_decay = 1e-2;
    t.checkpoint_every = 3;  // 0 1 2 3 6 7
    c.train = t;
    const cases::Op op = cases::Op::conv_transpose2d;
    const auto in = validate::testing::make_inputs(c, op, 21);
    auto task = validate::testing::make_task(c, op, in, tmp / c.name);
    task.step_inputs = [&c, op](std::int64_t s) { return validate::testing::make_inputs(c, op, 500 + s).owned; };
    auto res = r->run(task);
    ASSERT_EQ(res.size(), 1u);
    ASSERT_EQ(res[0].outcome, runners::RunOutcome::ok) << res[0].message;
    auto want = runners::oracle_trajectory(c, op, in.view(), task.step_inputs, {}, DType::float32, 2);
    ASSERT_TRUE(want) << want.message();
    EXPECT_EQ(want->size(), 1u + 6 * (c.params<cases::ConvTransposeParams>().bias ? 4 : 2)) << c.name;
    for (const auto& [name, w] : *want) {
      SCOPED_TRACE(c.name + " " + name);
      auto it = res[0].outputs.find(name);
      ASSERT_NE(it, res[0].outputs.end());
      ASSERT_EQ(it->second.shape(), w.shape());
      double worst = 0, scale = 0;
      for (std::int64_t i = 0; i < w.numel(); ++i) {
        worst = std::max(worst, std::fabs(it->second.get(i) - w.get(i)));
        scale = std::max(scale, std::fabs(w.get(i)));
      }
      EXPECT_GT(scale, 0);
      EXPECT_LE(worst, 1e-4 * scale);
      ++checked;
    }
    // The trajectory moves: step 7's weight is far from step 0's.
    const Tensor& w0 = want->at("step0_weight");
    const Tensor& w7 = want->at("step7_weight");
    double moved = 0, scale = 0;
    for (std::int64_t i = 0; i < w0.numel(); ++i) {
      moved = std::max(moved, std::fabs(w7.get(i) - w0.get(i)));
      scale = std::max(scale, std::fabs(w0.get(i)));
    }
    EXPECT_GT(moved, 1e-2 * scale) << c.name;
  }
  EXPECT_GE(checked, 20);
}
