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
#include "validate/runners/exec_runner.hpp"
#include "validate/runners/oracle_runner.hpp"

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
