#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>

#include "common/temp_dir.hpp"
#include "validate/layout/convert.hpp"
#include "validate/layout/preset.hpp"

namespace validate::layout {
namespace {

std::string spec_of(const Preset& p, const char* op, const char* tensor) { return to_string(p.ops.at(op).at(tensor)); }

TEST(Preset, NamesAndUnknown) {
  EXPECT_EQ(preset_names(), (std::vector<std::string>{"torch", "channels_last", "fortran", "linear_in_out",
                                                      "linear_out_in"}));
  auto bad = preset("fortan");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("unknown layout preset 'fortan'"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("fortran"), std::string::npos);
}

TEST(Preset, CanonicalAxesOfEveryTensor) {
  EXPECT_EQ(tensor_names("conv2d"), (std::vector<std::string>{"input", "weight", "bias", "target", "output", "loss",
                                                              "grad_input", "grad_weight", "grad_bias"}));
  EXPECT_EQ(tensor_names("matmul"),
            (std::vector<std::string>{"A", "B", "target", "output", "loss", "grad_A", "grad_B"}));
  EXPECT_TRUE(tensor_names("conv3d").empty());
  EXPECT_EQ(*canonical_axes("conv2d", "grad_weight"), "OIHW");
  EXPECT_EQ(*canonical_axes("conv2d", "bias"), "O");
  EXPECT_EQ(*canonical_axes("matmul", "grad_B"), "KN");
  EXPECT_EQ(*canonical_axes("matmul", "loss"), "");
  EXPECT_FALSE(canonical_axes("matmul", "weight").has_value());
}

TEST(Preset, TorchIsCanonical) {
  auto p = *preset("torch");
  for (const auto& op : op_names())
    for (const auto& t : tensor_names(op)) EXPECT_EQ(p.ops.at(op).at(t), canonical_spec(*canonical_axes(op, t))) << t;
}

TEST(Preset, EntriesAsDocumented) {
  auto cl = *preset("channels_last");
  for (const char* t : {"input", "target", "output", "grad_input"}) EXPECT_EQ(spec_of(cl, "conv2d", t), "NHWC");
  EXPECT_EQ(spec_of(cl, "conv2d", "weight"), "OHWI");
  EXPECT_EQ(spec_of(cl, "conv2d", "grad_weight"), "OHWI");
  EXPECT_EQ(spec_of(cl, "conv2d", "bias"), "O");
  EXPECT_EQ(spec_of(cl, "matmul", "B"), "KN");

  auto f = *preset("fortran");
  for (const char* t : {"input", "target", "output", "grad_input"}) EXPECT_EQ(spec_of(f, "conv2d", t), "CHWN:F");
  EXPECT_EQ(spec_of(f, "conv2d", "weight"), "WHIO:F+flip=HW");
  EXPECT_EQ(spec_of(f, "conv2d", "grad_weight"), "WHIO:F+flip=HW");  // cuDNN's dW for the buffer it was given
  EXPECT_EQ(spec_of(f, "conv2d", "grad_bias"), "O");
  EXPECT_EQ(spec_of(f, "conv2d", "loss"), "scalar");
  EXPECT_EQ(spec_of(f, "matmul", "A"), "MK:F");
  EXPECT_EQ(spec_of(f, "matmul", "grad_A"), "MK:F");
  EXPECT_EQ(spec_of(f, "matmul", "B"), "KN:F");
  EXPECT_EQ(spec_of(f, "matmul", "grad_B"), "KN:F");
  EXPECT_EQ(spec_of(f, "matmul", "output"), "MN:F");
  EXPECT_EQ(spec_of(f, "matmul", "target"), "MN:F");

  auto out_in = *preset("linear_out_in");
  EXPECT_EQ(spec_of(out_in, "matmul", "B"), "NK");
  EXPECT_EQ(spec_of(out_in, "matmul", "grad_B"), "NK");
  EXPECT_EQ(spec_of(out_in, "matmul", "A"), "MK");
  EXPECT_EQ(spec_of(out_in, "conv2d", "input"), "NCHW");
  auto in_out = *preset("linear_in_out");
  EXPECT_EQ(spec_of(in_out, "matmul", "B"), "KN");
  EXPECT_EQ(spec_of(in_out, "matmul", "grad_B"), "KN");
}

TEST(LayoutFile, PresetByName) {
  auto s = load_layout("fortran");
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(s->name, "fortran");
  EXPECT_EQ(s->format, "bin");
  EXPECT_TRUE(s->has_op("conv2d"));
  EXPECT_TRUE(s->has_op("matmul"));
  ASSERT_NE(s->find("conv2d", "weight"), nullptr);
  EXPECT_EQ(to_string(*s->find("conv2d", "weight")), "WHIO:F+flip=HW");
  EXPECT_EQ(s->find("conv2d", "nope"), nullptr);
}

// The example Fortran program's layout file is the fortran preset written out (examples/README.md),
// every op of it: the program answers "not supported" for the ops it does not do, so the file and
// `--layout fortran` run it alike (workflow test example.fortran.unsupported_op).
TEST(LayoutFile, FortranExampleFileEqualsThePreset) {
  const std::string path = std::string(VALIDATE_SOURCE_DIR) + "/examples/fortran/layouts.json";
  if (!std::ifstream(path)) GTEST_SKIP() << "no " << path;
  auto file = load_layout(path);
  ASSERT_TRUE(file.is_ok()) << file.message();
  const auto want = from_preset(*preset("fortran"));
  EXPECT_EQ(file->format, want.format);
  ASSERT_EQ(file->ops.size(), want.ops.size());
  for (const auto& [op, specs] : want.ops) {
    ASSERT_TRUE(file->has_op(op)) << op;
    EXPECT_EQ(file->ops.at(op), specs) << op;
  }
  // Every tensor is spelled out in the file, none left to its base (torch) preset: a program's
  // layout file declares what it reads and writes.
  auto doc = nlohmann::json::parse(std::ifstream(path));
  for (const auto& [op, specs] : want.ops)
    for (const auto& [tensor, spec] : specs) EXPECT_TRUE(doc[op].contains(tensor)) << op << "." << tensor;
}

class LayoutFileTest : public ::testing::Test {
 protected:
  testing::TempDir dir{"layout"};
  std::string write(const std::string& text) {
    const std::string path = dir / ("layout" + std::to_string(n_++) + ".json");
    std::ofstream(path) << text;
    return path;
  }
  std::string error(const std::string& text) {
    const std::string path = write(text);
    auto s = load_layout(path);
    EXPECT_FALSE(s.is_ok()) << text;
    if (s.is_ok()) return {};
    EXPECT_NE(s.message().find(path), std::string::npos) << "names the file: " << s.message();
    return s.message();
  }

 private:
  int n_ = 0;
};

TEST_F(LayoutFileTest, EntriesOverrideTorchAndAbsentOpsAreAbsent) {
  const std::string path = write(R"({"conv2d": {"input": "NHWC", "grad_input": "NHWC"}})");
  auto s = load_layout(path);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(s->name, path);
  EXPECT_EQ(s->format, "bin");
  EXPECT_TRUE(s->has_op("conv2d"));
  EXPECT_FALSE(s->has_op("matmul"));
  EXPECT_EQ(s->find("matmul", "A"), nullptr);
  EXPECT_EQ(to_string(*s->find("conv2d", "input")), "NHWC");
  EXPECT_EQ(to_string(*s->find("conv2d", "weight")), "OIHW");  // from torch
  EXPECT_EQ(s->ops.at("conv2d").size(), 9u);
}

TEST_F(LayoutFileTest, FormatBaseAndComment) {
  auto s = load_layout(write(R"({"format": "npy", "base": "fortran", "comment": "x", "matmul": {"B": "NK"}})"));
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(s->format, "npy");
  EXPECT_EQ(to_string(*s->find("matmul", "B")), "NK");
  EXPECT_EQ(to_string(*s->find("matmul", "A")), "MK:F");
  EXPECT_FALSE(s->has_op("conv2d"));
}

TEST_F(LayoutFileTest, Rejections) {
  EXPECT_NE(error(R"({"conv3d": {}})").find("unknown key 'conv3d'"), std::string::npos);
  EXPECT_NE(error(R"({"conv2d": {"kernel": "OIHW"}})").find("conv2d: unknown tensor 'kernel'"), std::string::npos);
  EXPECT_NE(error(R"({"matmul": {"B": "KM"}})").find("matmul.B: layout 'KM'"), std::string::npos);
  EXPECT_NE(error(R"({"matmul": {"loss": "MN"}})").find("matmul.loss"), std::string::npos);
  EXPECT_NE(error(R"({"matmul": {"A": 3}})").find("a layout spec is a string"), std::string::npos);
  EXPECT_NE(error(R"({"matmul": "MK"})").find("must be an object"), std::string::npos);
  EXPECT_NE(error(R"({"format": "csv"})").find("\"format\" must be \"bin\" or \"npy\""), std::string::npos);
  EXPECT_NE(error(R"({"base": "numpy"})").find("unknown layout preset 'numpy'"), std::string::npos);
  EXPECT_EQ(error(R"({"base": "numpy"})").find("did you mean"), std::string::npos);  // nothing is near
  EXPECT_NE(error(R"({"base": "fortan"})").find("; did you mean 'fortran'?"), std::string::npos);
  EXPECT_NE(error(R"(["NCHW"])").find("a layout file is a JSON object"), std::string::npos);
  EXPECT_FALSE(error(R"({"conv2d": {)").empty());  // not JSON
  auto missing = load_layout(dir / "missing.json");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.message().find("neither a preset (torch, channels_last, fortran, linear_in_out, linear_out_in) "
                                   "nor an existing file"),
            std::string::npos)
      << missing.message();
  // A misspelt preset gets the nearest one; a file name far from every preset gets no guess.
  auto typo = load_layout("fortan");
  ASSERT_FALSE(typo.is_ok());
  EXPECT_NE(typo.message().find("layout 'fortan' is neither a preset"), std::string::npos) << typo.message();
  EXPECT_NE(typo.message().find("; did you mean 'fortran'?"), std::string::npos) << typo.message();
  EXPECT_NE(load_layout("linear_out_im").message().find("did you mean 'linear_out_in'?"), std::string::npos);
  EXPECT_EQ(missing.message().find("did you mean"), std::string::npos) << missing.message();
}

TEST(LayoutJson, RunInfoShape) {
  auto s = *load_layout("linear_out_in");
  const nlohmann::json j = to_json(s);
  EXPECT_EQ(j["name"], "linear_out_in");
  EXPECT_EQ(j["format"], "bin");
  EXPECT_EQ(j["ops"]["matmul"]["B"], "NK");
  EXPECT_EQ(j["ops"]["matmul"]["loss"], "scalar");
  EXPECT_EQ(j["ops"]["conv2d"]["weight"], "OIHW");
  EXPECT_EQ(j["ops"]["conv2d"].size(), 9u);
}

}  // namespace
}  // namespace validate::layout

namespace validate::layout {
namespace {

// The fortran preset's weight entries, derived rather than restated. A Fortran program hands cuDNN
// an NCHW filter in CUDNN_CONVOLUTION mode, which computes a true convolution: it reads the filter
// buffer F as C-order OIHW and flips it. So the buffer must hold W flipped, and the dW cuDNN
// returns is dL/dF — the gradient flipped, in F's bytes. Here a float64 true convolution, written
// from cuDNN's definition and sharing nothing with the layout module, runs on the bytes the preset
// produces; its output must be PyTorch's cross-correlation with W, and its dF, read back through the
// preset's grad_weight spec, must be PyTorch's dW. Every axis has its own size.
TEST(Preset, FortranWeightsAreWhatCudnnConvolutionModeConsumesAndReturns) {
  const std::int64_t N = 2, C = 3, H = 7, Wd = 6, O = 4, KH = 3, KW = 2;
  const std::int64_t HO = H - KH + 1, WO = Wd - KW + 1;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  auto random = [&](const Shape& s) {
    Tensor t(DType::float64, s);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = u(rng);
    return t;
  };
  const Tensor x = random({N, C, H, Wd}), w = random({O, C, KH, KW}), dy = random({N, O, HO, WO});
  auto X = [&](auto n, auto c, auto h, auto ww) { return x.data<double>()[((n * C + c) * H + h) * Wd + ww]; };
  auto DY = [&](auto n, auto o, auto h, auto ww) { return dy.data<double>()[((n * O + o) * HO + h) * WO + ww]; };
  auto oihw = [&](auto o, auto c, auto kh, auto kw) { return ((o * C + c) * KH + kh) * KW + kw; };

  const Preset fortran = *preset("fortran");
  const Tensor filter = to_layout(w, "OIHW", fortran.ops.at("conv2d").at("weight"));
  const double* F = filter.data<double>();  // what cuDNN reads: C-order OIHW

  double max_dy = 0;
  Tensor dF(DType::float64, {O, C, KH, KW});  // cuDNN's dW buffer, C-order OIHW like F
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < O; ++o)
      for (std::int64_t oh = 0; oh < HO; ++oh)
        for (std::int64_t ow = 0; ow < WO; ++ow) {
          double conv = 0, xcorr = 0;
          for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t kh = 0; kh < KH; ++kh)
              for (std::int64_t kw = 0; kw < KW; ++kw) {
                // CUDNN_CONVOLUTION: filter tap (KH-1-kh, KW-1-kw) meets input (oh+kh, ow+kw).
                conv += X(n, c, oh + kh, ow + kw) * F[oihw(o, c, KH - 1 - kh, KW - 1 - kw)];
                xcorr += X(n, c, oh + kh, ow + kw) * w.data<double>()[oihw(o, c, kh, kw)];
                dF.data<double>()[oihw(o, c, KH - 1 - kh, KW - 1 - kw)] += X(n, c, oh + kh, ow + kw) * DY(n, o, oh, ow);
              }
          max_dy = std::max(max_dy, std::abs(conv - xcorr));
        }
  EXPECT_LT(max_dy, 1e-12) << "cuDNN's convolution of the preset's weight bytes is not PyTorch's conv2d";

  // PyTorch's dW from its definition.
  std::vector<double> dw(static_cast<std::size_t>(w.numel()), 0.0);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < O; ++o)
      for (std::int64_t c = 0; c < C; ++c)
        for (std::int64_t kh = 0; kh < KH; ++kh)
          for (std::int64_t kw = 0; kw < KW; ++kw)
            for (std::int64_t oh = 0; oh < HO; ++oh)
              for (std::int64_t ow = 0; ow < WO; ++ow)
                dw[static_cast<std::size_t>(oihw(o, c, kh, kw))] += X(n, c, oh + kh, ow + kw) * DY(n, o, oh, ow);

  auto max_diff_through = [&](const Spec& spec) {
    Tensor laid(DType::float64, shape_in_layout(spec, "OIHW", {O, C, KH, KW}));
    std::copy(dF.data<double>(), dF.data<double>() + dF.numel(), laid.data<double>());
    const Tensor back = from_layout(laid, "OIHW", {O, C, KH, KW}, spec);
    double d = 0;
    for (std::size_t i = 0; i < dw.size(); ++i) d = std::max(d, std::abs(back.data<double>()[i] - dw[i]));
    return d;
  };
  EXPECT_LT(max_diff_through(fortran.ops.at("conv2d").at("grad_weight")), 1e-12)
      << "the fortran preset's grad_weight spec does not read cuDNN's dW back as PyTorch's";
  // The trap: declaring dW like an unflipped weight reads it back rotated by 180 degrees.
  EXPECT_GT(max_diff_through(*parse_spec("WHIO:F", "OIHW")), 1e-3);
}

}  // namespace
}  // namespace validate::layout
