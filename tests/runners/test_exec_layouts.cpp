// The exec runner hands a program its inputs in the layouts it declared and reads its results back
// the same way: echo programs written here, whose results the test predicts value by value (bin
// and npy files, every preset's layouts, NaN and Inf as values).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "runners/exec_fixture.hpp"
#include "runners/runner_test_util.hpp"
#include "validate/core/npy.hpp"
#include "validate/layout/preset.hpp"

namespace validate {
namespace {

using runners::RunOutcome;
using testing::Exec;
using testing::kWriteLoss;
using testing::conv_case;
using testing::conv_params;
using testing::make_inputs;
using testing::matmul_case;
namespace stdfs = std::filesystem;

TEST_F(Exec, OutputOnlyLayoutFileEchoesTargetAndSkipsOtherOps) {
  // The file declares matmul's output and loss only: no gradient is expected, conv2d is skipped.
  auto set = layout_file("mm.json",
                         R"({"matmul": {"target": "MN:F", "output": "MN:F", "loss": "scalar"}})");
  auto r = runner(
      program("echo", std::string(R"(cp "$1/target.bin" "$1/output.bin")") + "\n" + kWriteLoss),
      set);
  auto c = conv_case("echo", conv_params(1, 2, 5, 4, 3, 2, 2, {1, 1}, {0, 1}, {1, 1}, 1, true),
                     DType::float32);
  const auto in = make_inputs(c, cases::Op::matmul, 5);
  auto res = run(*r, c, cases::Op::matmul, in, tmp / "w/mm");
  ASSERT_EQ(res.outcome, RunOutcome::ok) << res.message;
  ASSERT_EQ(res.outputs.size(), 2u);
  expect_same_values(res.outputs.at("output"), in.owned.at("target"), "output");
  EXPECT_EQ(res.outputs.at("loss").dim(), 0);
  EXPECT_EQ(res.outputs.at("loss").get(0), 1.5);
  EXPECT_EQ(res.info["layouts"]["output"], "MN:F");
  EXPECT_EQ(res.info["exit_status"], 0);

  const auto cin = make_inputs(c, cases::Op::conv2d, 5);
  auto skipped = run(*r, c, cases::Op::conv2d, cin, tmp / "w/conv");
  EXPECT_EQ(skipped.outcome, RunOutcome::skipped);
  EXPECT_EQ(skipped.message, "op not in the layout file");
  EXPECT_FALSE(stdfs::exists(tmp / "w/conv/case.json"));
}

// The fortran preset (flipped, column-major weights; CHWN:F activations) declares every gradient:
// a program that returns each input as "its" gradient must get it back, value for value.
TEST_F(Exec, EveryTensorRoundTripsThroughItsLayout) {
  auto r = runner(program("mirror", R"(
cd "$1"
if [ "$3" = conv2d ]; then
  cp input.bin grad_input.bin; cp weight.bin grad_weight.bin; cp bias.bin grad_bias.bin
else
  cp A.bin grad_A.bin; cp B.bin grad_B.bin
fi
cp target.bin output.bin
)" + std::string(kWriteLoss)),
                  *layout::load_layout("fortran"));
  for (DType dt : {DType::float32, DType::float16, DType::bfloat16}) {
    auto c =
        conv_case("mirror", conv_params(2, 3, 5, 4, 6, 3, 2, {2, 1}, {1, 0}, {1, 2}, 3, true), dt);
    for (cases::Op op : {cases::Op::conv2d, cases::Op::matmul}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + cases::op_name(op));
      const auto in = make_inputs(c, op, 9);
      auto res =
          run(*r, c, op, in, tmp / ("w/" + std::string(dtype_name(dt)) + cases::op_name(op)));
      ASSERT_EQ(res.outcome, RunOutcome::ok) << res.message;
      const bool conv = op == cases::Op::conv2d;
      for (const char* from : conv ? std::vector<const char*>{"input", "weight", "bias"}
                                   : std::vector<const char*>{"A", "B"})
        expect_same_values(res.outputs.at(std::string("grad_") + from), in.owned.at(from), from);
      expect_same_values(res.outputs.at("output"), in.owned.at("target"), "output");
      EXPECT_EQ(res.outputs.size(), conv ? 5u : 4u);
    }
  }
}

// npy: inputs carry fortran_order and the layout's shape, so numpy indexes them with the layout's
// axes; results are read the same way, whatever order the program saved them in.
TEST_F(Exec, NpyFilesAreIndexedWithTheLayoutsAxes) {
  Tensor loss(DType::float32, Shape{});
  loss.set(0, 0.25);
  ASSERT_TRUE(npy::write(tmp / "loss_template.npy", loss));
  auto set = layout_file("npy.json", R"({"format": "npy", "base": "fortran",
      "conv2d": {"grad_weight": "WHIO:F+flip=HW", "output": "CHWN:F"}})");
  auto r = runner(
      program("npy", R"(cd "$1"; cp weight.npy grad_weight.npy; cp target.npy output.npy; cp )" +
                         tmp / "loss_template.npy" + " loss.npy"),
      set, 30, /*keep=*/true);
  auto c = conv_case("npy", conv_params(1, 2, 4, 6, 3, 3, 2, {1, 1}, {1, 0}, {1, 1}, 1, false),
                     DType::float32);
  const auto in = make_inputs(c, cases::Op::conv2d, 3);
  auto res = run(*r, c, cases::Op::conv2d, in, tmp / "w/npy");
  ASSERT_EQ(res.outcome, RunOutcome::ok) << res.message;
  EXPECT_EQ(res.outputs.size(), 3u);  // output, loss, grad_weight: the file names no other gradient
  expect_same_values(res.outputs.at("grad_weight"), in.owned.at("weight"), "grad_weight");
  expect_same_values(res.outputs.at("output"), in.owned.at("target"), "output");
  EXPECT_EQ(res.outputs.at("loss").get(0), 0.25);

  // weight.npy is the Fortran array w(KW, KH, I, O), stored flipped: w[kw,kh,i,o] =
  // W[o,i,KH-1-kh,KW-1-kw].
  auto bytes = slurp(tmp / "w/npy/weight.npy");
  auto h = npy::parse_header(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(),
                             "weight.npy");
  ASSERT_TRUE(h.is_ok()) << h.message();
  EXPECT_TRUE(h->fortran_order);
  EXPECT_EQ(h->shape, (Shape{2, 3, 2, 3}));
  auto w = npy::read(tmp / "w/npy/weight.npy");  // returned in C order over (KW, KH, I, O)
  ASSERT_TRUE(w.is_ok());
  const Tensor& W = in.owned.at("weight");  // [O=3, I=2, KH=3, KW=2]
  for (int kw = 0; kw < 2; ++kw)
    for (int kh = 0; kh < 3; ++kh)
      for (int i = 0; i < 2; ++i)
        for (int o = 0; o < 3; ++o)
          ASSERT_EQ(w->get(((kw * 3 + kh) * 2 + i) * 3 + o),
                    W.get(((o * 2 + i) * 3 + (2 - kh)) * 2 + (1 - kw)));
  // A C-ordered result of the right logical shape is read the same as a Fortran-ordered one.
  ASSERT_TRUE(npy::write(tmp / "c_order_weight.npy", *w));
  auto r2 = runner(program("npy_c", R"(cd "$1"; cp )" + tmp / "c_order_weight.npy" +
                                        R"( grad_weight.npy; cp target.npy output.npy; cp )" +
                                        tmp / "loss_template.npy" + " loss.npy"),
                   set);
  auto res2 = run(*r2, c, cases::Op::conv2d, in, tmp / "w/npy_c");
  ASSERT_EQ(res2.outcome, RunOutcome::ok) << res2.message;
  expect_same_values(res2.outputs.at("grad_weight"), in.owned.at("weight"),
                     "grad_weight from C order");
}

// NaN and Inf are values, not failures: the runner hands them on bit for bit (compare judges
// them, tests/reliability/exec_faults.sh checks that it fails the case), in both storage dtypes.
TEST_F(Exec, NanAndInfArePassedOnUnchanged) {
  auto set = layout_file("mm.json", R"({"matmul": {"output": "MN", "loss": "scalar"}})");
  // output = target with element 0 NaN, 1 +Inf, 2 -Inf (little-endian bit patterns); loss NaN.
  auto r = runner(program("nan", R"(
cd "$1"; cp target.bin output.bin
if [ "$4" = float16 ]; then nan='\000\176'; pinf='\000\174'; ninf='\000\374'; else
  nan='\000\000\300\177'; pinf='\000\000\200\177'; ninf='\000\000\200\377'; fi
printf "$nan$pinf$ninf" | dd of=output.bin conv=notrunc status=none
printf '\000\000\300\177' > loss.bin)"),
                  set);
  for (DType dt : {DType::float32, DType::float16}) {
    SCOPED_TRACE(dtype_name(dt));
    auto c = matmul_case("nan", 3, 5, 4, dt);
    const auto in = make_inputs(c, cases::Op::matmul, 8);
    auto res = run(*r, c, cases::Op::matmul, in, tmp / ("w/nan" + std::string(dtype_name(dt))));
    ASSERT_EQ(res.outcome, RunOutcome::ok) << res.message;
    const Tensor& out = res.outputs.at("output");
    const Tensor& target = in.owned.at("target");
    ASSERT_EQ(out.numel(), 12);
    EXPECT_TRUE(std::isnan(out.get(0)));
    EXPECT_EQ(out.get(1), std::numeric_limits<double>::infinity());
    EXPECT_EQ(out.get(2), -std::numeric_limits<double>::infinity());
    for (std::int64_t i = 3; i < 12; ++i) EXPECT_EQ(out.get(i), target.get(i)) << i;
    EXPECT_TRUE(std::isnan(res.outputs.at("loss").get(0)));
  }
}

}  // namespace
}  // namespace validate
