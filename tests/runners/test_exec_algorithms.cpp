// The exec layout file's "algorithms": copied per case into the run record's info.algorithms
// (Winograd only where the geometry admits it, direct elsewhere), kept through the record's JSON,
// and unknown ops, tensors or algorithm names refused before anything runs, naming the file.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "runners/exec_fixture.hpp"
#include "runners/runner_test_util.hpp"
#include "validate/cases/run_record.hpp"
#include "validate/layout/preset.hpp"

namespace validate {
namespace {

using testing::conv_case;
using testing::conv_params;
using testing::Exec;
using testing::make_inputs;

constexpr const char* kLayouts = R"({"format": "npy",
  "conv2d": {"input": "NHWC", "weight": "OHWI", "output": "NHWC", "grad_input": "NHWC", "grad_weight": "OHWI"},
  "algorithms": {"conv2d": {"output": "winograd_f4", "grad_input": "fft", "grad_weight": "split_k:4"}}})";

TEST_F(Exec, AlgorithmsAreRecordedPerCaseWhereTheGeometryAdmitsThem) {
  auto set = layout_file("alg.json", kLayouts);
  auto r = runner(program("noop", "exit 1"), set);  // the record is written whatever the program does
  // 3x3, stride 1, dilation 1 (batch 2, every axis its own size): Winograd and FFT apply.
  auto fast = conv_case("fast", conv_params(2, 3, 7, 9, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, true), DType::float32);
  auto a = run(*r, fast, cases::Op::conv2d, make_inputs(fast, cases::Op::conv2d, 3), tmp / "w/fast");
  const std::map<std::string, std::string> want_fast{
      {"output", "winograd_f4"}, {"grad_input", "fft"}, {"grad_weight", "split_k:4"}};
  EXPECT_EQ(a.notes.algorithms, want_fast);
  // Stride 2: neither Winograd nor FFT runs it; split-K still does.
  auto strided = conv_case("strided", conv_params(2, 3, 7, 9, 5, 3, 3, {2, 1}, {1, 1}, {1, 1}, 1, true), DType::float32);
  auto b = run(*r, strided, cases::Op::conv2d, make_inputs(strided, cases::Op::conv2d, 4), tmp / "w/strided");
  const std::map<std::string, std::string> want_strided{
      {"output", "direct"}, {"grad_input", "direct"}, {"grad_weight", "split_k:4"}};
  EXPECT_EQ(b.notes.algorithms, want_strided);
  // 3x2 kernel, stride 1: FFT applies, Winograd F(m, 3) does not.
  auto narrow = conv_case("narrow", conv_params(2, 3, 7, 9, 5, 3, 2, {1, 1}, {1, 0}, {1, 1}, 1, true), DType::float32);
  auto c = run(*r, narrow, cases::Op::conv2d, make_inputs(narrow, cases::Op::conv2d, 5), tmp / "w/narrow");
  EXPECT_EQ(c.notes.algorithms.at("output"), "direct");
  EXPECT_EQ(c.notes.algorithms.at("grad_input"), "fft");

  // The record's JSON keeps them under info.algorithms.
  const Json info = cases::to_json(a.notes);
  ASSERT_TRUE(info.contains("algorithms"));
  EXPECT_EQ(info["algorithms"]["output"], "winograd_f4");
  EXPECT_EQ(cases::notes_from_json(info).algorithms, want_fast);
}

TEST_F(Exec, UnknownAlgorithmsAreRefusedNamingTheFile) {
  const auto refused = [&](const std::string& name, const std::string& algorithms,
                           std::vector<std::string> needles) {
    SCOPED_TRACE(name);
    auto set = layout_file(name, R"({"conv2d": {"output": "NCHW"}, "algorithms": )" + algorithms + "}");
    auto r = runners::make_exec_runner({program("noop", "exit 0"), 30, false, {}}, set);
    const Status st = r->prepare();
    ASSERT_FALSE(st.is_ok());
    needles.push_back(tmp / name);
    for (const auto& n : needles) EXPECT_NE(st.message().find(n), std::string::npos) << "no '" << n << "' in: " << st.message();
  };
  refused("name.json", R"({"conv2d": {"output": "winogard_f4"}})",
          {"algorithms.conv2d.output: unknown algorithm 'winogard_f4'", "did you mean 'winograd_f4'?"});
  refused("split.json", R"({"conv2d": {"output": "split_k:0"}})", {"unknown algorithm 'split_k:0'"});
  refused("tensor.json", R"({"conv2d": {"outptu": "fft"}})", {"unknown tensor 'outptu'", "did you mean 'output'?"});
  refused("op.json", R"({"conv2e": {"output": "fft"}})", {"unknown op 'conv2e'", "did you mean 'conv2d'?"});
  refused("shape.json", R"(["fft"])", {"\"algorithms\" must be an object"});
}

}  // namespace
}  // namespace validate
