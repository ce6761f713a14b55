// A layout file that names an op but not its gradients: a gradient the program writes anyway is
// read in the spec the file's base preset gives it and returned (compare checks it), one it does
// not write is "not requested". Shapes with every axis a different size and batch 2, so a gradient
// read in the wrong layout cannot come back equal by accident.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "runners/exec_fixture.hpp"
#include "runners/runner_test_util.hpp"
#include "validate/layout/convert.hpp"
#include "validate/layout/spec.hpp"

namespace validate {
namespace {

using runners::RunOutcome;
using testing::Exec;
using testing::kWriteLoss;
using testing::conv_case;
using testing::conv_params;
using testing::make_inputs;

// n 2, c 3, h 5, w 4, o 6, kh 3, kw 2: every axis of input and weight a different size.
cases::Case distinct_case(const std::string& name) {
  return conv_case(name, conv_params(2, 3, 5, 4, 6, 3, 2, {1, 1}, {1, 0}, {1, 1}, 1, true), DType::float32);
}

// Names conv2d's input layout only: the gradients are the base preset's (torch: NCHW, OIHW, O).
constexpr const char* kInputsOnly = R"({"base": "torch", "conv2d": {"input": "NHWC"}})";

TEST_F(Exec, UnnamedGradientsThatTheProgramWritesAreReadInTheBaseLayout) {
  auto set = layout_file("inputs_only.json", kInputsOnly);
  // The program hands back its NHWC input as grad_input and the weight (OIHW, the base's) as
  // grad_weight; it writes no grad_bias.
  auto r = runner(program("grads", std::string(R"(cd "$1"
cp target.bin output.bin
cp input.bin grad_input.bin
cp weight.bin grad_weight.bin
)") + kWriteLoss),
                  set);
  const auto c = distinct_case("unnamed");
  const auto in = make_inputs(c, cases::Op::conv2d, 11);
  auto res = run(*r, c, cases::Op::conv2d, in, tmp / "w/grads");
  ASSERT_EQ(res.outcome, RunOutcome::ok) << res.message;
  ASSERT_EQ(res.outputs.size(), 4u);  // output, loss, grad_input, grad_weight
  expect_same_values(res.outputs.at("grad_weight"), in.owned.at("weight"), "grad_weight (OIHW both ways)");

  // grad_input.bin holds the input's NHWC bytes and is read as the base's NCHW: the canonical
  // tensor is those bytes under an NCHW label, which is not the input.
  const Tensor& x = in.owned.at("input");
  const Tensor nhwc = layout::to_layout(x, "NCHW", *layout::parse_spec("NHWC", "NCHW"));
  const Tensor& got = res.outputs.at("grad_input");
  ASSERT_EQ(got.shape(), x.shape());
  ASSERT_EQ(got.nbytes(), nhwc.nbytes());
  EXPECT_EQ(std::memcmp(got.bytes(), nhwc.bytes(), got.nbytes()), 0) << "read in a layout other than NCHW";
  EXPECT_NE(std::memcmp(got.bytes(), x.bytes(), got.nbytes()), 0);

  EXPECT_EQ(res.notes.unnamed_results,
            (std::map<std::string, std::string>{{"grad_input", "NCHW"}, {"grad_weight", "OIHW"}}));
  ASSERT_TRUE(res.notes.not_requested.has_value());
  EXPECT_EQ(*res.notes.not_requested, std::vector<std::string>{"grad_bias"});
  // Read files are cleaned up like every result.
  EXPECT_FALSE(std::filesystem::exists(tmp / "w/grads/grad_input.bin"));
}

TEST_F(Exec, AForwardOnlyProgramLeavesTheUnnamedGradientsNotRequested) {
  auto set = layout_file("inputs_only.json", kInputsOnly);
  auto r = runner(program("forward", std::string(R"(cp "$1/target.bin" "$1/output.bin")") + "\n" + kWriteLoss), set);
  const auto c = distinct_case("forward");
  const auto in = make_inputs(c, cases::Op::conv2d, 12);
  auto res = run(*r, c, cases::Op::conv2d, in, tmp / "w/forward");
  ASSERT_EQ(res.outcome, RunOutcome::ok) << res.message;
  EXPECT_EQ(res.outputs.size(), 2u);
  EXPECT_TRUE(res.notes.unnamed_results.empty());
  ASSERT_TRUE(res.notes.not_requested.has_value());
  EXPECT_EQ(*res.notes.not_requested, (std::vector<std::string>{"grad_input", "grad_weight", "grad_bias"}));
}

TEST_F(Exec, AnUnnamedGradientThatCannotBeReadFailsTheTask) {
  auto set = layout_file("inputs_only.json", kInputsOnly);
  const auto c = distinct_case("bad");
  const auto in = make_inputs(c, cases::Op::conv2d, 13);
  const std::string forward = std::string(R"(cd "$1"; cp target.bin output.bin)") + "\n" + kWriteLoss + "\n";

  // A size the base's spec does not fit (one float instead of 2*3*5*4).
  auto r = runner(program("short", forward + R"(printf '\000\000\200\077' > grad_input.bin)"), set);
  auto res = run(*r, c, cases::Op::conv2d, in, tmp / "w/short");
  ASSERT_EQ(res.outcome, RunOutcome::error);
  EXPECT_NE(res.message.find("grad_input.bin: 4 bytes, expected 480 bytes (float32 [2, 3, 5, 4] in layout NCHW)"),
            std::string::npos)
      << res.message;
  EXPECT_NE(res.message.find("the layout file does not name it"), std::string::npos) << res.message;
  EXPECT_TRUE(res.outputs.empty());

  // The other format: an .npy gradient beside a "bin" layout file is named, not ignored.
  auto r2 = runner(program("npy", forward + R"(printf 'x' > grad_weight.npy)"), set);
  auto res2 = run(*r2, c, cases::Op::conv2d, in, tmp / "w/npy");
  ASSERT_EQ(res2.outcome, RunOutcome::error);
  EXPECT_NE(res2.message.find("grad_weight.npy: written, but the layout file's format is \"bin\": expected grad_weight.bin"),
            std::string::npos)
      << res2.message;
}

}  // namespace
}  // namespace validate
