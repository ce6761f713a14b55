// The run driver around a runner: one op that throws or fails never stops the others, and what
// runners report about how they ran (paths, --repeat nondeterminism) reaches the summary and
// run_info.json.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/temp_dir.hpp"
#include "validate/layout/preset.hpp"
#include "validate/backends/oracle_runner.hpp"
#include "validate/backends/run_driver.hpp"

namespace validate {
namespace {

// The oracle, plus what a GPU runner would add: the path each op's activations took, and for one
// case a --repeat that moved grad_weight's bits; one case makes the runner throw.
class Annotating final : public runners::Runner {
 public:
  Annotating() : oracle_(runners::make_oracle_runner(*layout::load_layout("torch"))) {}
  std::string name() const override { return "annotating"; }
  nlohmann::json info() const override { return {{"device", "cpu"}, {"math", "float64"}}; }
  std::vector<runners::OpResult> run(const runners::OpTask& task) override {
    if (task.c->name == "k0144_ic016" && task.op == cases::Op::matmul) throw std::runtime_error("boom");
    auto res = oracle_->run(task);
    const bool conv = task.op == cases::Op::conv2d;
    res[0].notes.paths["activation"] = conv && task.c->name == "k0072_ic008" ? "strided" : "native";
    if (conv && task.c->name == "odd_n3_c5_h11_w6") {
      res[0].notes.bitwise_deterministic = false;
      res[0].notes.nondeterministic_tensors = {"grad_weight", "grad_input"};
    }
    return res;
  }

 private:
  std::unique_ptr<runners::Runner> oracle_;
};

TEST(RunDriver, AThrowingOpFailsAloneAndRunnerNotesReachRunInfo) {
  testing::TempDir tmp("run_driver");
  runners::RunOptions opt;
  opt.ref = std::string(VALIDATE_SOURCE_DIR) + "/references/smoke";
  opt.out = tmp.path() + "/run";
  opt.only = "^float32/";
  opt.progress = 0;
  Annotating runner;
  std::ostringstream log;
  auto sum = runners::run_cases(runner, opt, log);
  ASSERT_TRUE(sum.is_ok()) << sum.message();
  // float32 in the smoke set: k0072_ic008, k0144_ic016, odd_n2_c6_h7_w9_g2, odd_n3_c5_h11_w6.
  EXPECT_EQ(sum->ok, 7);
  EXPECT_EQ(sum->error, 1);
  ASSERT_EQ(sum->failures.size(), 1u);
  EXPECT_EQ(sum->failures[0], "float32/k0144_ic016 matmul: runner threw: boom");
  ASSERT_EQ(sum->nondeterministic.size(), 1u);
  EXPECT_EQ(sum->nondeterministic[0], "float32/odd_n3_c5_h11_w6 conv2d: grad_weight, grad_input");

  std::ifstream in(opt.out + "/run_info.json");
  const auto info = nlohmann::json::parse(in);
  EXPECT_EQ(info["paths"]["conv2d"]["activation_path"], nlohmann::json({"strided", "native"}));
  EXPECT_EQ(info["paths"]["matmul"]["activation_path"], nlohmann::json({"native"}));
  EXPECT_EQ(info["nondeterministic"], nlohmann::json({sum->nondeterministic[0]}));
  EXPECT_EQ(info["summary"]["error"], 1);
  std::ifstream k0144(opt.out + "/float32/k0144_ic016_run.json");
  const auto doc = nlohmann::json::parse(k0144);
  EXPECT_EQ(doc["ops"]["conv2d"]["outcome"], "ok");
  EXPECT_EQ(doc["ops"]["matmul"]["outcome"], "error");
}

// run_info.json splits the time: the runner's compute and layout conversion, the driver's I/O.
TEST(RunDriver, RunInfoSplitsOracleTimeIntoComputeConversionAndIo) {
  testing::TempDir tmp("run_time_split");
  runners::RunOptions opt;
  opt.ref = std::string(VALIDATE_SOURCE_DIR) + "/references/smoke";
  opt.out = tmp.path() + "/run";
  opt.only = "^float32/k0144";
  opt.progress = 0;
  auto oracle = runners::make_oracle_runner(*layout::load_layout("fortran"), runners::OracleOptions{2});
  std::ostringstream log;
  auto sum = runners::run_cases(*oracle, opt, log);
  ASSERT_TRUE(sum.is_ok()) << sum.message();
  std::ifstream in(opt.out + "/run_info.json");
  const auto info = nlohmann::json::parse(in);
  ASSERT_TRUE(info.contains("time_s")) << info.dump(2);
  const auto& t = info["time_s"];
  for (const char* k : {"compute", "conversion", "io"}) {
    ASSERT_TRUE(t.contains(k) && t[k].is_number()) << k << " " << t.dump();
    EXPECT_GT(t[k].get<double>(), 0.0) << k;  // every part ran: fortran layouts convert, files are read
  }
  EXPECT_LT(t["compute"].get<double>() + t["conversion"].get<double>() + t["io"].get<double>(), sum->seconds + 0.01);
  EXPECT_EQ(info["runner"]["threads"], 2);
}

}  // namespace
}  // namespace validate
