#include <gtest/gtest.h>

#include <fstream>

#include "common/temp_dir.hpp"
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

// The example Fortran program's layout file is the fortran preset written out (examples/README.md).
TEST(LayoutFile, FortranExampleFileEqualsThePreset) {
  const std::string path = std::string(VALIDATE_SOURCE_DIR) + "/examples/fortran/layouts.json";
  if (!std::ifstream(path)) GTEST_SKIP() << "no " << path;
  auto file = load_layout(path);
  ASSERT_TRUE(file.is_ok()) << file.message();
  EXPECT_EQ(file->ops, from_preset(*preset("fortran")).ops);
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
  EXPECT_NE(error(R"(["NCHW"])").find("a layout file is a JSON object"), std::string::npos);
  EXPECT_FALSE(error(R"({"conv2d": {)").empty());  // not JSON
  auto missing = load_layout(dir / "missing.json");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.message().find("neither a preset (torch, channels_last, fortran, linear_in_out, linear_out_in) "
                                   "nor an existing file"),
            std::string::npos)
      << missing.message();
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
