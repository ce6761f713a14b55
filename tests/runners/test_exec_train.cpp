// The exec protocol for training cases (version 2, docs/runners.md): each later step's batch in
// steps/<s>/ in the program's layouts, the schedule in case.json and the environment, the loss
// curve and the checkpoints read back through their layouts; a program that ignores protocol 2
// fails; the steps x input bytes cap; single-step cases keep protocol 1. The programs are /bin/sh
// scripts that copy files, so every value the test expects is one it wrote itself.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/temp_dir.hpp"
#include "runners/exec_fixture.hpp"
#include "runners/runner_test_util.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/npy.hpp"
#include "validate/layout/preset.hpp"
#include "validate/backends/exec_runner.hpp"
#include "validate/train/schedule.hpp"

namespace validate {
namespace {

using runners::RunOutcome;
using testing::conv_case;
using testing::conv_params;
using testing::make_inputs;
using testing::make_task;
using testing::matmul_case;
namespace stdfs = std::filesystem;

class ExecTrain : public testing::ExecFixture {
 protected:
  ExecTrain() : ExecFixture("exec_train") {}
  std::unique_ptr<runners::Runner> runner(const std::string& cmd, const layout::LayoutSet& set, bool keep = true,
                                          std::uint64_t cap = std::uint64_t{1} << 30) {
    runners::ExecOptions o{cmd, 30, keep, {}};
    o.max_step_input_bytes = cap;
    return prepared(o, set);
  }
  // A task whose later batches are make_inputs(c, op, 1000 + s): every input, parameters
  // included, so a runner that wrote a parameter into steps/ would be seen doing it.
  runners::OpResult run(runners::Runner& r, const cases::Case& c, cases::Op op, const testing::Inputs& in,
                        const std::string& dir) {
    auto task = make_task(c, op, in, dir);
    task.step_inputs = [&c, op](std::int64_t s) { return make_inputs(c, op, 1000 + s).owned; };
    auto v = r.run(task);
    EXPECT_EQ(v.size(), 1u);
    return std::move(v[0]);
  }
  static train::TrainConfig schedule(std::int64_t steps, std::int64_t every) {
    train::TrainConfig t;
    t.steps = steps;
    t.lr = 0.05;
    t.momentum = 0.9;
    t.dampening = 0.1;
    t.weight_decay = 1e-3;
    t.checkpoint_every = every;
    return t;
  }
  static std::map<std::string, std::string> env_of(const std::string& path) {
    std::map<std::string, std::string> env;
    std::istringstream lines(slurp(path));
    for (std::string l; std::getline(lines, l);)
      if (auto eq = l.find('='); eq != std::string::npos) env[l.substr(0, eq)] = l.substr(eq + 1);
    return env;
  }
  // The loss curve the programs hand back: 1/(s+1) rounded to float32.
  std::string curve_file(std::int64_t steps, bool npy_format) {
    Tensor curve(DType::float32, Shape{steps});
    for (std::int64_t s = 0; s < steps; ++s) curve.set(s, 1.0 / (s + 1));
    const std::string path = tmp / (npy_format ? "curve.npy" : "curve.bin");
    EXPECT_TRUE(npy_format ? npy::write(path, curve) : fs::write_atomic(path, curve.bytes(), curve.nbytes(), ""));
    return path;
  }
};

// 1.5f, little-endian.
constexpr const char* kWriteLossInWorkDir = R"(printf '\000\000\300\077' > loss.bin)";

// conv2d in the fortran preset (CHWN:F data, flipped column-major WHIO:F+flip=HW weights), every
// axis a different size, batch 2: the batches of steps 1..4 are in steps/<s>/ in those layouts
// (checked element by element against an index formula written here), parameters only once, the
// schedule in case.json and the environment, and the checkpoints come back through the layouts of
// the tensors they are snapshots of.
TEST_F(ExecTrain, Protocol2HandsEveryBatchAndReadsTheTrajectoryBack) {
  auto c = conv_case("tr", conv_params(2, 6, 7, 9, 4, 3, 2, {2, 1}, {1, 0}, {1, 2}, 2, true), DType::float32);
  c.train = schedule(5, 0);  // checkpoints 0, 1, 2, 4 (first three, last)
  const std::string curve = curve_file(5, false);
  auto r = runner(program("mirror", R"(
cd "$1"
env > env.txt
ls -R steps > steps.txt
cp target.bin output.bin; cp input.bin grad_input.bin; cp weight.bin grad_weight.bin; cp bias.bin grad_bias.bin
)" + std::string(kWriteLossInWorkDir) + "\ncp " + curve + R"( train_loss.bin
for k in $VALIDATE_CHECKPOINTS; do
  cp weight.bin step${k}_weight.bin; cp weight.bin step${k}_grad_weight.bin
  cp bias.bin step${k}_bias.bin; cp bias.bin step${k}_grad_bias.bin
done)"),
                  *layout::load_layout("fortran"));
  const auto in = make_inputs(c, cases::Op::conv2d, 7);
  const std::string dir = tmp / "w/tr/conv2d";
  auto res = run(*r, c, cases::Op::conv2d, in, dir);
  ASSERT_EQ(res.outcome, RunOutcome::ok) << res.message;
  EXPECT_EQ(res.info["protocol"], "validate-exec/2");

  // Results: the 5 single-step ones, the curve, 4 checkpoints x 4 tensors.
  EXPECT_EQ(res.outputs.size(), 5u + 1u + 16u);
  const Tensor& loss_curve = res.outputs.at("train_loss");
  ASSERT_EQ(loss_curve.shape(), (Shape{5}));
  EXPECT_EQ(loss_curve.dtype(), DType::float32);
  for (int s = 0; s < 5; ++s) EXPECT_EQ(loss_curve.get(s), static_cast<double>(1.0f / (s + 1))) << s;
  for (int k : {0, 1, 2, 4}) {
    const std::string p = "step" + std::to_string(k) + "_";
    expect_same_values(res.outputs.at(p + "weight"), in.owned.at("weight"), p + "weight");
    expect_same_values(res.outputs.at(p + "grad_weight"), in.owned.at("weight"), p + "grad_weight");
    expect_same_values(res.outputs.at(p + "bias"), in.owned.at("bias"), p + "bias");
    expect_same_values(res.outputs.at(p + "grad_bias"), in.owned.at("bias"), p + "grad_bias");
  }
  EXPECT_EQ(res.outputs.count("step3_weight"), 0u);

  // steps/<s>/ holds input.bin and target.bin for s = 1..4 and nothing else: no step 0 (its batch
  // is the work dir's own), no parameter.
  EXPECT_EQ(slurp(dir + "/steps.txt"),
            "steps:\n1\n2\n3\n4\n\nsteps/1:\ninput.bin\ntarget.bin\n\nsteps/2:\ninput.bin\ntarget.bin\n\n"
            "steps/3:\ninput.bin\ntarget.bin\n\nsteps/4:\ninput.bin\ntarget.bin\n");
  // Each step's batch in CHWN:F: element (n, c, h, w) at c + C (h + H (w + W n)).
  const std::int64_t N = 2, C = 6, H = 7, W = 9, O = 4, Ho = 4, Wo = 7;
  for (std::int64_t s = 1; s < 5; ++s) {
    const auto want = make_inputs(c, cases::Op::conv2d, 1000 + s);
    const std::string x = slurp(dir + "/steps/" + std::to_string(s) + "/input.bin");
    const std::string t = slurp(dir + "/steps/" + std::to_string(s) + "/target.bin");
    ASSERT_EQ(x.size(), std::size_t(N * C * H * W * 4));
    ASSERT_EQ(t.size(), std::size_t(N * O * Ho * Wo * 4));
    const float* xf = reinterpret_cast<const float*>(x.data());
    const float* tf = reinterpret_cast<const float*>(t.data());
    const Tensor& X = want.owned.at("input");
    const Tensor& T = want.owned.at("target");
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t ch = 0; ch < C; ++ch)
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t w = 0; w < W; ++w)
            ASSERT_EQ(xf[ch + C * (h + H * (w + W * n))], X.get(((n * C + ch) * H + h) * W + w))
                << "step " << s << " input " << n << ch << h << w;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t o = 0; o < O; ++o)
        for (std::int64_t h = 0; h < Ho; ++h)
          for (std::int64_t w = 0; w < Wo; ++w)
            ASSERT_EQ(tf[o + O * (h + Ho * (w + Wo * n))], T.get(((n * O + o) * Ho + h) * Wo + w))
                << "step " << s << " target";
  }

  auto env = env_of(dir + "/env.txt");
  const std::map<std::string, std::string> want_env{
      {"VALIDATE_PROTOCOL", "2"},           {"VALIDATE_STEPS", "5"},
      {"VALIDATE_OPTIMIZER", "sgd"},        {"VALIDATE_LR", "0.050000000000000003"},
      {"VALIDATE_MOMENTUM", "0.90000000000000002"}, {"VALIDATE_DAMPENING", "0.10000000000000001"},
      {"VALIDATE_WEIGHT_DECAY", "0.001"},   {"VALIDATE_NESTEROV", "0"},
      {"VALIDATE_NCHECKPOINTS", "4"},       {"VALIDATE_CHECKPOINTS", "0 1 2 4"},
      {"VALIDATE_STEPS_DIR", dir + "/steps"}, {"VALIDATE_N", "2"}, {"VALIDATE_OP", "conv2d"}};
  for (const auto& [k, v] : want_env) EXPECT_EQ(env[k], v) << k;

  auto doc = read_json(dir + "/case.json");
  ASSERT_TRUE(doc.is_ok()) << doc.message();
  const Json& j = *doc;
  EXPECT_EQ(j["protocol"], "validate-exec/2");
  EXPECT_EQ(j["train"], Json::parse(R"({"steps": 5, "optimizer": "sgd", "lr": 0.05, "momentum": 0.9,
      "dampening": 0.1, "weight_decay": 0.001, "nesterov": false, "checkpoint_every": 0})"));
  EXPECT_EQ(j["checkpoints"], Json::parse("[0, 1, 2, 4]"));
  EXPECT_EQ(j["step_inputs"], Json::parse(R"({"dir": "steps/{step}", "first_step": 1, "last_step": 4,
      "tensors": ["input", "target"]})"));
  EXPECT_EQ(j["tensors"]["train_loss"],
            Json::parse(R"({"file": "train_loss.bin", "layout": "S", "shape": [5], "role": "loss_curve", "dtype": "float32"})"));
  EXPECT_EQ(j["tensors"]["step2_grad_weight"],
            Json::parse(R"({"file": "step2_grad_weight.bin", "layout": "WHIO:F+flip=HW", "shape": [2, 3, 3, 4],
                            "role": "checkpoint", "dtype": "float32"})"));
  EXPECT_EQ(j["tensors"]["step4_bias"]["layout"], "O");
  EXPECT_FALSE(j["tensors"].contains("step3_weight"));
}

// npy, matmul with B stored transposed ("NK", C order): the checkpoints of B come back through
// that layout, the curve from a .npy; without --keep-work steps/ is removed after a good read.
TEST_F(ExecTrain, NpyCheckpointsGoThroughTheParametersLayout) {
  auto c = matmul_case("mm_tr", 5, 3, 4, DType::float32);
  c.train = schedule(2, 0);  // checkpoints 0, 1
  const std::string curve = curve_file(2, true);
  auto set = layout_file("nk.json", R"({"format": "npy", "base": "torch", "matmul": {"B": "NK", "grad_B": "NK"}})");
  auto r = runner(program("mm", R"(
cd "$1"
test -f steps/1/A.npy && test -f steps/1/target.npy && test ! -e steps/1/B.npy
cp target.npy output.npy; cp A.npy grad_A.npy; cp B.npy grad_B.npy; cp )" + curve + R"( train_loss.npy
for k in 0 1; do cp B.npy step${k}_B.npy; cp B.npy step${k}_grad_B.npy; done
cp ")" + (tmp / "loss.npy") + R"(" loss.npy)"),
                  set, /*keep=*/false);
  Tensor loss(DType::float32, Shape{});
  loss.set(0, 0.5);
  ASSERT_TRUE(npy::write(tmp / "loss.npy", loss));
  const auto in = make_inputs(c, cases::Op::matmul, 3);
  const std::string dir = tmp / "w/mm";
  auto res = run(*r, c, cases::Op::matmul, in, dir);
  ASSERT_EQ(res.outcome, RunOutcome::ok) << res.message;
  for (const char* t : {"step0_B", "step1_B", "step0_grad_B", "step1_grad_B"})
    expect_same_values(res.outputs.at(t), in.owned.at("B"), t);
  EXPECT_EQ(res.outputs.at("train_loss").get(1), 0.5);
  EXPECT_FALSE(stdfs::exists(dir + "/steps"));
  EXPECT_FALSE(stdfs::exists(dir + "/step0_B.npy"));
  EXPECT_TRUE(stdfs::exists(dir + "/case.json"));
}

// A program that knows only protocol 1 writes the single-step results and nothing of the
// trajectory: the task fails with one sentence that says so, and no result is passed on (so
// compare cannot pass the case on its step-0 tensors alone).
TEST_F(ExecTrain, AProgramThatIgnoresProtocol2Fails) {
  auto c = conv_case("v1", conv_params(2, 3, 5, 4, 2, 2, 3, {1, 1}, {0, 1}, {1, 1}, 1, false), DType::float32);
  c.train = schedule(3, 0);
  auto r = runner(program("v1", R"(
cd "$1"
cp target.bin output.bin; cp input.bin grad_input.bin; cp weight.bin grad_weight.bin
)" + std::string(kWriteLossInWorkDir)),
                  *layout::load_layout("fortran"));
  const auto in = make_inputs(c, cases::Op::conv2d, 2);
  auto res = run(*r, c, cases::Op::conv2d, in, tmp / "w/v1");
  ASSERT_EQ(res.outcome, RunOutcome::error);
  EXPECT_TRUE(res.outputs.empty());
  EXPECT_NE(res.message.find("a training case (3 steps): the program wrote none of its trajectory (7 files: "
                             "train_loss.bin, step0_weight.bin, ...)"),
            std::string::npos)
      << res.message;
  EXPECT_NE(res.message.find("VALIDATE_PROTOCOL=2"), std::string::npos) << res.message;

  // Part of the trajectory missing: each missing file is named.
  auto r2 = runner(program("partial", R"(
cd "$1"
cp target.bin output.bin; cp input.bin grad_input.bin; cp weight.bin grad_weight.bin
)" + std::string(kWriteLossInWorkDir) + "\ncp " + curve_file(3, false) + R"( train_loss.bin
for k in 0 2; do cp weight.bin step${k}_weight.bin; cp weight.bin step${k}_grad_weight.bin; done)"),
                   *layout::load_layout("fortran"));
  auto res2 = run(*r2, c, cases::Op::conv2d, in, tmp / "w/partial");
  ASSERT_EQ(res2.outcome, RunOutcome::error);
  EXPECT_NE(res2.message.find("step1_weight.bin: missing (the program did not write it); step1_grad_weight.bin: missing"),
            std::string::npos)
      << res2.message;
  EXPECT_EQ(res2.message.find("none of its trajectory"), std::string::npos) << res2.message;

  // A curve of the wrong length is refused by its size.
  auto r3 = runner(program("short_curve", R"(
cd "$1"
cp target.bin output.bin; cp input.bin grad_input.bin; cp weight.bin grad_weight.bin
)" + std::string(kWriteLossInWorkDir) + "\ncp " + curve_file(2, false) + R"( train_loss.bin
for k in 0 1 2; do cp weight.bin step${k}_weight.bin; cp weight.bin step${k}_grad_weight.bin; done)"),
                   *layout::load_layout("fortran"));
  auto res3 = run(*r3, c, cases::Op::conv2d, in, tmp / "w/short");
  ASSERT_EQ(res3.outcome, RunOutcome::error);
  EXPECT_NE(res3.message.find("train_loss.bin: 8 bytes, expected 12 bytes (float32 [3] in layout S)"), std::string::npos)
      << res3.message;
}

// steps x input bytes above the cap: the task fails before its work directory is touched, and
// the message gives the figures and the option.
TEST_F(ExecTrain, TheStepInputCapIsStatedAndNothingIsWritten) {
  auto c = conv_case("cap", conv_params(2, 3, 5, 4, 2, 2, 3, {1, 1}, {0, 1}, {1, 1}, 1, false), DType::float32);
  c.train = schedule(11, 0);
  // One batch: input 2*3*5*4 + target 2*2*4*4 float32 values = (120 + 64) * 4 = 736 bytes; 10 later steps.
  auto r = runner(program("never", "touch \"$1/ran\""), *layout::load_layout("fortran"), true, 7359);
  const auto in = make_inputs(c, cases::Op::conv2d, 2);
  const std::string dir = tmp / "w/cap";
  auto res = run(*r, c, cases::Op::conv2d, in, dir);
  ASSERT_EQ(res.outcome, RunOutcome::error);
  EXPECT_NE(res.message.find("trains 11 steps and each batch is 736 bytes, so steps/ would hold 10 x 736 = 7360 "
                             "bytes (steps x input bytes), above the exec runner's cap of 7359 bytes"),
            std::string::npos)
      << res.message;
  EXPECT_NE(res.message.find("--max-step-inputs-mb"), std::string::npos);
  EXPECT_FALSE(stdfs::exists(dir));
  // At the cap it runs.
  auto r2 = runner(program("ran", "touch \"$1/ran\"; exit 1"), *layout::load_layout("fortran"), true, 7360);
  auto res2 = run(*r2, c, cases::Op::conv2d, in, dir);
  EXPECT_TRUE(stdfs::exists(dir + "/ran")) << res2.message;
  EXPECT_TRUE(stdfs::exists(dir + "/steps/10/input.bin"));
}

// A training task without its later batches is an internal error, said as such.
TEST_F(ExecTrain, ATrainingTaskWithoutStepInputsFails) {
  auto c = matmul_case("nosteps", 2, 3, 4, DType::float32);
  c.train = schedule(2, 0);
  auto r = runner(program("never", "touch \"$1/ran\""), *layout::load_layout("torch"));
  const auto in = make_inputs(c, cases::Op::matmul, 1);
  auto v = r->run(make_task(c, cases::Op::matmul, in, tmp / "w/nosteps"));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].outcome, RunOutcome::error);
  EXPECT_NE(v[0].message.find("OpTask::step_inputs is not set"), std::string::npos) << v[0].message;
  EXPECT_FALSE(stdfs::exists(tmp / "w/nosteps/ran"));
}

// A single-step case keeps protocol 1: no steps/ (an earlier training run's is removed), no
// schedule in case.json, and a VALIDATE_PROTOCOL=2 inherited from the caller does not reach it.
TEST_F(ExecTrain, SingleStepCasesStayOnProtocol1) {
  auto c = matmul_case("single", 2, 3, 4, DType::float32);
  const std::string dir = tmp / "w/single";
  ASSERT_TRUE(fs::make_dirs(dir + "/steps/1"));
  ASSERT_TRUE(fs::write_atomic(dir + "/steps/1/A.bin", std::string("stale")));
  ::setenv("VALIDATE_PROTOCOL", "2", 1);
  ::setenv("VALIDATE_STEPS", "9", 1);
  auto r = runner(program("env", R"(cd "$1"; env > env.txt; test ! -e steps; exit 5)"), *layout::load_layout("torch"));
  const auto in = make_inputs(c, cases::Op::matmul, 1);
  auto res = run(*r, c, cases::Op::matmul, in, dir);
  ::unsetenv("VALIDATE_PROTOCOL");
  ::unsetenv("VALIDATE_STEPS");
  EXPECT_NE(res.message.find("exited with status 5"), std::string::npos) << res.message;  // not 1: steps/ is gone
  auto env = env_of(dir + "/env.txt");
  EXPECT_EQ(env.count("VALIDATE_PROTOCOL"), 0u);
  EXPECT_EQ(env.count("VALIDATE_STEPS"), 0u);
  auto doc = read_json(dir + "/case.json");
  ASSERT_TRUE(doc.is_ok());
  EXPECT_EQ((*doc)["protocol"], "validate-exec/1");
  for (const char* k : {"train", "checkpoints", "step_inputs"}) EXPECT_FALSE(doc->contains(k)) << k;
  EXPECT_FALSE((*doc)["tensors"].contains("train_loss"));
  EXPECT_EQ(res.info["protocol"], "validate-exec/1");
}

}  // namespace
}  // namespace validate
