// What the exec runner gives a program (docs/runners.md): its environment and case.json, the
// command with its placeholders shell-quoted, and the options it refuses before running anything.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include "runners/exec_fixture.hpp"
#include "runners/runner_test_util.hpp"
#include "validate/core/json_io.hpp"
#include "validate/layout/preset.hpp"
#include "validate/backends/exec_runner.hpp"

namespace validate {
namespace {

using runners::RunOutcome;
using testing::Exec;
using testing::conv_case;
using testing::conv_params;
using testing::make_inputs;
using testing::matmul_case;
namespace stdfs = std::filesystem;

TEST_F(Exec, EnvironmentAndCaseJsonFollowTheProtocol) {
  ::setenv("VALIDATE_M", "999", 1);  // stale protocol variable of an enclosing run: must not leak
  ::setenv("VALIDATE_TEST_PASSTHROUGH", "kept", 1);
  auto r = runner(
      program(
          "env",
          R"(env > "$1/env.txt"; printf '%s|%s|%s|%s' "$1" "$2" "$3" "$4" > "$1/args.txt"; exit 7)"),
      *layout::load_layout("fortran"));
  ::unsetenv("VALIDATE_M");
  auto c = conv_case("env_case", conv_params(2, 6, 7, 9, 4, 3, 2, {2, 1}, {1, 0}, {1, 2}, 2, false),
                     DType::bfloat16);
  const auto in = make_inputs(c, cases::Op::conv2d, 4);
  // A work dir with a space and a quote: {dir} must reach the program as one argument.
  const std::string dir = tmp / "w/it's a dir/conv2d";
  ::setenv("VALIDATE_M", "999", 1);
  auto res = run(*r, c, cases::Op::conv2d, in, dir);
  ::unsetenv("VALIDATE_M");
  ::unsetenv("VALIDATE_TEST_PASSTHROUGH");
  EXPECT_EQ(res.outcome, RunOutcome::error);
  EXPECT_NE(res.message.find("exited with status 7"), std::string::npos) << res.message;
  EXPECT_EQ(slurp(dir + "/args.txt"), dir + "|env_case|conv2d|bfloat16");

  std::map<std::string, std::string> env;
  std::istringstream lines(slurp(dir + "/env.txt"));
  for (std::string l; std::getline(lines, l);)
    if (auto eq = l.find('='); eq != std::string::npos) env[l.substr(0, eq)] = l.substr(eq + 1);
  const std::map<std::string, std::string> want{{"VALIDATE_OP", "conv2d"},
                                                {"VALIDATE_CASE", "env_case"},
                                                {"VALIDATE_DTYPE", "bfloat16"},
                                                {"VALIDATE_DIR", dir},
                                                {"VALIDATE_FORMAT", "bin"},
                                                {"VALIDATE_N", "2"},
                                                {"VALIDATE_C", "6"},
                                                {"VALIDATE_H", "7"},
                                                {"VALIDATE_W", "9"},
                                                {"VALIDATE_O", "4"},
                                                {"VALIDATE_KH", "3"},
                                                {"VALIDATE_KW", "2"},
                                                {"VALIDATE_SH", "2"},
                                                {"VALIDATE_SW", "1"},
                                                {"VALIDATE_PH", "1"},
                                                {"VALIDATE_PW", "0"},
                                                {"VALIDATE_DH", "1"},
                                                {"VALIDATE_DW", "2"},
                                                {"VALIDATE_GROUPS", "2"},
                                                {"VALIDATE_HOUT", "4"},
                                                {"VALIDATE_WOUT", "7"},
                                                {"VALIDATE_BIAS", "0"},
                                                {"VALIDATE_TEST_PASSTHROUGH", "kept"}};
  for (const auto& [k, v] : want) EXPECT_EQ(env[k], v) << k;
  for (const char* k : {"VALIDATE_M", "VALIDATE_K", "VALIDATE_NCOLS"})
    EXPECT_EQ(env.count(k), 0u) << k;

  auto doc = read_json(dir + "/case.json");
  ASSERT_TRUE(doc.is_ok()) << doc.message();
  const Json& j = *doc;
  EXPECT_EQ(j["protocol"], "validate-exec/1");
  EXPECT_EQ(j["op"], "conv2d");
  EXPECT_EQ(j["case"], "env_case");
  EXPECT_EQ(j["dtype"], "bfloat16");
  EXPECT_EQ(j["storage_dtype"], "float32");
  EXPECT_EQ(j["format"], "bin");
  EXPECT_EQ(
      j["params"],
      Json::parse(R"({"N": 2, "C": 6, "H": 7, "W": 9, "O": 4, "KH": 3, "KW": 2, "stride": [2, 1],
      "padding": [1, 0], "dilation": [1, 2], "groups": 2, "bias": false, "Hout": 4, "Wout": 7})"));
  const Json want_tensors = Json::parse(R"({
    "input":  {"file": "input.bin",  "layout": "CHWN:F", "shape": [6, 7, 9, 2], "role": "input", "dtype": "float32"},
    "weight": {"file": "weight.bin", "layout": "WHIO:F+flip=HW", "shape": [2, 3, 3, 4], "role": "input", "dtype": "float32"},
    "target": {"file": "target.bin", "layout": "CHWN:F", "shape": [4, 4, 7, 2], "role": "input", "dtype": "float32"},
    "output": {"file": "output.bin", "layout": "CHWN:F", "shape": [4, 4, 7, 2], "role": "output", "dtype": "float32"},
    "loss":   {"file": "loss.bin",   "layout": "scalar", "shape": [], "role": "loss", "dtype": "float32"},
    "grad_input":  {"file": "grad_input.bin",  "layout": "CHWN:F", "shape": [6, 7, 9, 2], "role": "grad", "dtype": "float32"},
    "grad_weight": {"file": "grad_weight.bin", "layout": "WHIO:F+flip=HW", "shape": [2, 3, 3, 4], "role": "grad", "dtype": "float32"}})");
  EXPECT_EQ(j["tensors"], want_tensors) << j["tensors"].dump(1);
  // The input files are the tensors in those layouts: sizes say so (no bias file without a bias).
  EXPECT_EQ(stdfs::file_size(dir + "/input.bin"), 2u * 6 * 7 * 9 * 4);
  EXPECT_FALSE(stdfs::exists(dir + "/bias.bin"));

  // matmul, float16 storage.
  auto m = matmul_case("mm_env", 6, 5, 4, DType::float16);
  const auto min = make_inputs(m, cases::Op::matmul, 4);
  const std::string mdir = tmp / "w/mm";
  run(*r, m, cases::Op::matmul, min, mdir);
  env.clear();
  std::istringstream mlines(slurp(mdir + "/env.txt"));
  for (std::string l; std::getline(mlines, l);)
    if (auto eq = l.find('='); eq != std::string::npos) env[l.substr(0, eq)] = l.substr(eq + 1);
  EXPECT_EQ(env["VALIDATE_M"], "6");
  EXPECT_EQ(env["VALIDATE_K"], "5");
  EXPECT_EQ(env["VALIDATE_NCOLS"], "4");
  EXPECT_EQ(env["VALIDATE_DTYPE"], "float16");
  for (const char* k : {"VALIDATE_N", "VALIDATE_GROUPS", "VALIDATE_BIAS"})
    EXPECT_EQ(env.count(k), 0u) << k;
  auto mdoc = read_json(mdir + "/case.json");
  ASSERT_TRUE(mdoc.is_ok());
  EXPECT_EQ((*mdoc)["params"], Json::parse(R"({"M": 6, "K": 5, "N": 4})"));
  EXPECT_EQ((*mdoc)["storage_dtype"], "float16");
  EXPECT_EQ(
      (*mdoc)["tensors"]["B"],
      Json::parse(
          R"({"file": "B.bin", "layout": "KN:F", "shape": [5, 4], "role": "input", "dtype": "float16"})"));
  EXPECT_EQ((*mdoc)["tensors"]["loss"]["dtype"], "float32");
  EXPECT_EQ(stdfs::file_size(mdir + "/A.bin"), 6u * 5 * 2);
}

TEST(ExecCommand, PlaceholdersAreShellQuoted) {
  EXPECT_EQ(runners::expand_command("run {dir} --case={case} {op}/{dtype} {other} {dir",
                                    "/a b/it's", "k1", "matmul", "float16"),
            "run '/a b/it'\\''s' --case='k1' 'matmul'/'float16' {other} {dir");
}

TEST(ExecPrepare, RejectsAnEmptyCommandAndABadTimeout) {
  auto set = *layout::load_layout("torch");
  EXPECT_FALSE(runners::make_exec_runner({"", 10, false, {}}, set)->prepare().is_ok());
  EXPECT_FALSE(runners::make_exec_runner({"true", 0, false, {}}, set)->prepare().is_ok());
  EXPECT_TRUE(runners::make_exec_runner({"true", 10, false, {}}, set)->prepare().is_ok());
}

}  // namespace
}  // namespace validate
