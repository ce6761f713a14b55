// The cuDNN runner end to end on small cases whose every axis differs, against the float64 CPU
// reference in gpu_test_util.hpp: each preset's layouts (native NCHW/NHWC, strided CHWN:F, flipped
// filters in conv mode, which the default mode picks from the layout), dtypes, groups/stride/
// dilation, --algo all, --repeat, and the mistakes the tool exists to expose (a flipped gradient
// declared unflipped; TF32) showing up as large errors.
#include <gtest/gtest.h>

#include <set>

#include "gpu_test_util.hpp"
#include "validate/layout/layout.hpp"
#include "validate/backends/cudnn_runner.hpp"

namespace validate::runners {
namespace {

using testing_gpu::Tensors;

cases::Case conv_case(const char* name, DType dt, cases::ConvParams p) {
  cases::Case c;
  c.name = name;
  c.dtype = dt;
  c.params<cases::ConvParams>() = p;
  c.params<cases::MatmulParams>() = cases::im2col_gemm(p);
  return c;
}

// The smoke file's odd geometries: groups, stride, dilation, padding, H != W, N > 1, no bias.
cases::ConvParams odd_grouped() {
  cases::ConvParams p;
  p.n = 2, p.c = 6, p.h = 7, p.w = 9, p.o = 4, p.kh = 3, p.kw = 2;
  p.stride = {2, 1}, p.padding = {1, 0}, p.dilation = {1, 2}, p.groups = 2, p.bias = false;
  return p;
}
cases::ConvParams odd_biased() {
  cases::ConvParams p;
  p.n = 3, p.c = 5, p.h = 11, p.w = 6, p.o = 7, p.kh = 2, p.kw = 3;
  p.stride = {1, 2}, p.padding = {0, 1}, p.dilation = {2, 1}, p.groups = 1, p.bias = true;
  return p;
}
cases::ConvParams plain3x3() {
  cases::ConvParams p;
  p.n = 2, p.c = 8, p.h = 12, p.w = 10, p.o = 16, p.kh = 3, p.kw = 3;
  return p;
}

std::vector<OpResult> run(const CudnnOptions& o, const layout::LayoutSet& ls, const cases::Case& c,
                          cases::Op op, const Tensors& in) {
  auto r = make_cudnn_runner(o, ls);
  EXPECT_TRUE(r) << r.message();
  if (!r) return {};
  const Status st = (*r)->prepare();
  EXPECT_TRUE(st) << st.message();
  OpTask task;
  task.c = &c;
  task.op = op;
  for (const auto& [name, t] : in) task.inputs[name] = &t;
  return (*r)->run(task);
}

// Every produced tensor within `tol` (relative to the tensor's scale) of the reference.
void expect_close(const OpResult& r, const std::map<std::string, std::vector<double>>& ref,
                  double tol, const std::string& what) {
  ASSERT_EQ(r.outcome, RunOutcome::ok) << what << ": " << r.message << "\n" << r.info.dump(1);
  for (const auto& [name, want] : ref) {
    auto it = r.outputs.find(name);
    ASSERT_NE(it, r.outputs.end()) << what << ": no " << name;
    const double err = testing_gpu::relative_error(it->second, want);
    EXPECT_LE(err, tol) << what << " [" << r.variant << "] " << name << "\n" << r.info.dump(1);
  }
}

double tolerance(DType d) { return d == DType::float32 ? 2e-5 : d == DType::float16 ? 1e-2 : 4e-2; }

struct LayoutCase {
  const char* preset;
  const char* conv_mode;
};

class CudnnConv : public ::testing::TestWithParam<std::tuple<DType, LayoutCase>> {};

TEST_P(CudnnConv, MatchesTheFloat64Reference) {
  VALIDATE_REQUIRE_GPU();
  const auto [dt, lc] = GetParam();
  const auto ls = *layout::load_layout(lc.preset);
  CudnnOptions o;
  o.conv_mode = lc.conv_mode;
  // auto: cuDNN's legacy bias calls where they accept the descriptors; own: the runner's own
  // bias-add and channel-sum kernels (the fallback for strided CHWN:F and bfloat16), always.
  for (const char* bias : {"auto", "own"}) {
    o.bias = bias;
    for (const auto& p : {odd_grouped(), odd_biased(), plain3x3()}) {
      const auto c = conv_case("c", dt, p);
      const auto in = testing_gpu::conv_inputs(c);
      const auto ref = testing_gpu::conv_reference(c, in);
      auto results = run(o, ls, c, cases::Op::conv2d, in);
      ASSERT_EQ(results.size(), 1u);
      EXPECT_EQ(results[0].variant, "");
      expect_close(results[0], ref, tolerance(dt),
                   std::string(lc.preset) + "/" + lc.conv_mode + "/bias=" + bias);
      EXPECT_TRUE(results[0].notes.paths.count("activation"));
      if (std::string(lc.preset) == "fortran") {
        EXPECT_NE(results[0].notes.paths["activation"], "native");
      }
      if (p.bias) {
        const std::string add = results[0].info.value("bias_add", "");
        if (std::string(bias) == "own")
          EXPECT_EQ(add, "own kernel (requested)");
        else
          EXPECT_TRUE(add == "cudnnAddTensor" || add.rfind("own kernel (cudnnAddTensor", 0) == 0)
              << add;
      }
      // What is recorded is what ran: each direction's applied math type, FMA for float32.
      for (const char* d : {"fwd", "bwd_data", "bwd_filter"}) {
        ASSERT_TRUE(results[0].info["algorithm_selection"][d].contains("math_type")) << d;
        if (dt == DType::float32) {
          EXPECT_EQ(results[0].info["algorithm_selection"][d]["math_type"], "CUDNN_FMA_MATH") << d;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, CudnnConv,
                         ::testing::Combine(::testing::Values(DType::float32, DType::bfloat16,
                                                              DType::float16),
                                            ::testing::Values(LayoutCase{"torch", "xcorr"},
                                                              LayoutCase{"channels_last", "xcorr"},
                                                              LayoutCase{"fortran", "conv"})),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_" +
                                  std::get<1>(info.param).preset + "_" +
                                  std::get<1>(info.param).conv_mode;
                         });

// The fortran preset's weights are pre-flipped for CUDNN_CONVOLUTION. Without --conv-mode the
// runner takes that mode from the weight spec, so the default run is right rather than a
// cross-correlation with the rotated kernel; xcorr for the unflipped torch preset alongside.
TEST(CudnnConvMode, DefaultModeIsRightForFlippedAndUnflippedWeights) {
  VALIDATE_REQUIRE_GPU();
  for (const char* preset : {"fortran", "torch"})
    for (const auto& p : {odd_biased(), odd_grouped()}) {
      const auto c = conv_case("c", DType::float32, p);
      const auto in = testing_gpu::conv_inputs(c);
      auto results = run({}, *layout::load_layout(preset), c, cases::Op::conv2d, in);
      ASSERT_EQ(results.size(), 1u);
      expect_close(results[0], testing_gpu::conv_reference(c, in), 2e-5, preset);
      EXPECT_EQ(results[0].info["conv_mode"],
                std::string(preset) == "fortran" ? "CUDNN_CONVOLUTION" : "CUDNN_CROSS_CORRELATION");
    }
}

// A layout whose grad_weight is declared unflipped while cuDNN returns it flipped (conv mode): the
// returned dW must disagree, as it would for a program that forgot the flip.
TEST(CudnnConvMistakes, GradWeightDeclaredUnflippedIsWrong) {
  VALIDATE_REQUIRE_GPU();
  auto ls = *layout::load_layout("fortran");
  ls.ops["conv2d"]["grad_weight"] = *layout::parse_spec("WHIO:F", "OIHW");
  const auto c = conv_case("c", DType::float32, plain3x3());
  const auto in = testing_gpu::conv_inputs(c);
  const auto ref = testing_gpu::conv_reference(c, in);
  CudnnOptions o;
  o.conv_mode = "conv";
  auto results = run(o, ls, c, cases::Op::conv2d, in);
  ASSERT_EQ(results[0].outcome, RunOutcome::ok) << results[0].message;
  EXPECT_LE(testing_gpu::relative_error(results[0].outputs.at("output"), ref.at("output")), 2e-5);
  EXPECT_GT(
      testing_gpu::relative_error(results[0].outputs.at("grad_weight"), ref.at("grad_weight")),
      0.05);
}

// Flipped activations cannot be strides: they are converted, and still right.
TEST(CudnnConvLayouts, FlippedAndOddActivationLayoutsAreConvertedOrStrided) {
  VALIDATE_REQUIRE_GPU();
  auto ls = *layout::load_layout("torch");
  for (const char* s : {"NCHW+flip=HW", "WCHN:F", "HWNC", "NWHC"}) {
    for (const char* t : {"input", "target", "output", "grad_input"})
      ls.ops["conv2d"][t] = *layout::parse_spec(s, "NCHW");
    ls.ops["conv2d"]["weight"] = ls.ops["conv2d"]["grad_weight"] =
        *layout::parse_spec("HWIO", "OIHW");
    const auto c = conv_case("c", DType::float32, odd_biased());
    const auto in = testing_gpu::conv_inputs(c);
    auto results = run({}, ls, c, cases::Op::conv2d, in);
    ASSERT_EQ(results.size(), 1u);
    expect_close(results[0], testing_gpu::conv_reference(c, in), 2e-5, s);
    EXPECT_EQ(results[0].notes.paths["filter"], "converted") << s;
  }
}

TEST(CudnnConvAlgos, AllVariesOneDirectionAtATime) {
  VALIDATE_REQUIRE_GPU();
  const auto c = conv_case("c", DType::float32, plain3x3());
  const auto in = testing_gpu::conv_inputs(c);
  const auto ref = testing_gpu::conv_reference(c, in);
  CudnnOptions o;
  o.algo_fwd = o.algo_bwd_data = o.algo_bwd_filter = "all";
  o.repeat = 2;
  auto results = run(o, *layout::load_layout("torch"), c, cases::Op::conv2d, in);
  ASSERT_GE(results.size(), 3u);
  ASSERT_EQ(results[0].outcome, RunOutcome::ok) << results[0].message;  // the baseline
  std::set<std::string> labels;
  int ran = 0;
  for (const auto& r : results) {
    EXPECT_EQ(r.variant.rfind("fwd=", 0), 0u) << r.variant;
    EXPECT_TRUE(labels.insert(r.variant).second) << "duplicate " << r.variant;
    // Listed by the heuristics but refused when executed: unsupported, never an error.
    EXPECT_NE(r.outcome, RunOutcome::error) << r.variant << ": " << r.message;
    if (r.outcome == RunOutcome::unsupported) continue;
    ++ran;
    // FFT and Winograd round differently; everything is still float32-close.
    expect_close(r, ref, 1e-4, r.variant);
    // --repeat 2: every variant records whether its repeats agreed bit for bit (RunNotes).
    EXPECT_TRUE(r.notes.bitwise_deterministic.has_value()) << r.variant;
  }
  EXPECT_GE(ran, 3);
}

TEST(CudnnConvAlgos, NamedAlgorithmIsUsedOrUnsupported) {
  VALIDATE_REQUIRE_GPU();
  const auto c = conv_case("c", DType::float32, odd_grouped());
  const auto in = testing_gpu::conv_inputs(c);
  CudnnOptions o;
  o.algo_fwd = "IMPLICIT_GEMM";
  auto results = run(o, *layout::load_layout("torch"), c, cases::Op::conv2d, in);
  ASSERT_EQ(results.size(), 1u);
  if (results[0].outcome == RunOutcome::ok) {
    EXPECT_EQ(results[0].info["algorithm_selection"]["fwd"]["algo"], "IMPLICIT_GEMM");
    EXPECT_EQ(results[0].info["algorithms"]["output"], "direct");
    EXPECT_EQ(results[0].info["cudnn_algorithms"]["output"],
              "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM");
  } else {
    EXPECT_EQ(results[0].outcome, RunOutcome::unsupported) << results[0].message;
  }
  // FFT does not do dilation: unsupported for this case, named in the message, and not an error.
  o.algo_fwd = "FFT";
  results = run(o, *layout::load_layout("torch"), c, cases::Op::conv2d, in);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_NE(results[0].outcome, RunOutcome::error) << results[0].message;
}

class CudnnMatmul : public ::testing::TestWithParam<std::tuple<DType, const char*>> {};

TEST_P(CudnnMatmul, MatchesTheFloat64Reference) {
  VALIDATE_REQUIRE_GPU();
  const auto [dt, preset] = GetParam();
  cases::Case c;
  c.name = "m";
  c.dtype = dt;
  c.params<cases::MatmulParams>() = {37, 29, 23};
  const auto in = testing_gpu::matmul_inputs(c);
  const auto ref = testing_gpu::matmul_reference(c, in);
  auto results = run({}, *layout::load_layout(preset), c, cases::Op::matmul, in);
  ASSERT_EQ(results.size(), 1u);
  expect_close(results[0], ref, tolerance(dt), preset);
}

INSTANTIATE_TEST_SUITE_P(Layouts, CudnnMatmul,
                         ::testing::Combine(::testing::Values(DType::float32, DType::bfloat16,
                                                              DType::float16),
                                            ::testing::Values("torch", "fortran", "linear_out_in")),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) + "_" +
                                  std::get<1>(info.param);
                         });

TEST(CudnnMatmulLayouts, MixedOrdersAndFlips) {
  VALIDATE_REQUIRE_GPU();
  auto ls = *layout::load_layout("torch");
  ls.ops["matmul"]["A"] = *layout::parse_spec("KM", "MK");
  ls.ops["matmul"]["B"] = *layout::parse_spec("KN+flip=K", "KN");
  ls.ops["matmul"]["output"] = ls.ops["matmul"]["target"] = *layout::parse_spec("NM:F", "MN");
  ls.ops["matmul"]["grad_A"] = *layout::parse_spec("MK:F", "MK");
  ls.ops["matmul"]["grad_B"] = *layout::parse_spec("NK", "KN");
  cases::Case c;
  c.name = "m";
  c.params<cases::MatmulParams>() = {41, 19, 13};
  const auto in = testing_gpu::matmul_inputs(c);
  auto results = run({}, ls, c, cases::Op::matmul, in);
  expect_close(results[0], testing_gpu::matmul_reference(c, in), 2e-5, "mixed");
  EXPECT_EQ(results[0].info["matrices"]["B"]["path"], "converted");
}

// TF32 keeps 10 mantissa bits of each input: on a K = 4096 product the float32 error grows by
// orders of magnitude. This is what --math tf32 must show and --math fma must not.
TEST(CudnnMath, Tf32IsVisibleAndFmaIsNot) {
  VALIDATE_REQUIRE_GPU();
  cases::Case c;
  c.name = "m";
  c.params<cases::MatmulParams>() = {256, 4096, 64};
  const auto in = testing_gpu::matmul_inputs(c);
  const auto ref = testing_gpu::matmul_reference(c, in);
  CudnnOptions o;
  auto fma = run(o, *layout::load_layout("torch"), c, cases::Op::matmul, in);
  expect_close(fma[0], ref, 2e-5, "fma");
  EXPECT_EQ(fma[0].info["compute_type"], "CUBLAS_COMPUTE_32F");
  o.math = "tf32";
  auto tf32 = run(o, *layout::load_layout("torch"), c, cases::Op::matmul, in);
  ASSERT_EQ(tf32[0].outcome, RunOutcome::ok) << tf32[0].message;
  EXPECT_GT(testing_gpu::relative_error(tf32[0].outputs.at("output"), ref.at("output")), 1e-4);
  EXPECT_EQ(tf32[0].info["compute_type"], "CUBLAS_COMPUTE_32F_FAST_TF32");
}

TEST(CudnnRepeat, RepeatRecordsDeterminism) {
  VALIDATE_REQUIRE_GPU();
  cases::Case c;
  c.name = "m";
  c.params<cases::MatmulParams>() = {64, 48, 32};
  const auto in = testing_gpu::matmul_inputs(c);
  CudnnOptions o;
  o.repeat = 3;
  auto r = run(o, *layout::load_layout("torch"), c, cases::Op::matmul, in);
  ASSERT_EQ(r[0].outcome, RunOutcome::ok) << r[0].message;
  EXPECT_EQ(r[0].info["repeat"], 3);
  ASSERT_TRUE(r[0].notes.bitwise_deterministic.has_value());
  EXPECT_TRUE(*r[0].notes.bitwise_deterministic);  // cuBLASLt matmul: deterministic
}

}  // namespace
}  // namespace validate::runners
