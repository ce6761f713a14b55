// conv_transpose2d end to end on the CPU: the float64 reference against a hand-computed case,
// its gradients against finite differences of its own loss, the oracle against LibTorch in
// float64 on the odd cases of cases/conv_transpose2d.json, and layouts invisible in its results.
#include <gtest/gtest.h>

#include <cmath>

#include "runner_test_util.hpp"
#include "validate/cases/case_file.hpp"
#include "validate/core/sha256.hpp"
#include "validate/core/tensor_hash.hpp"
#include "validate/layout/preset.hpp"
#include "validate/ops/registry.hpp"
#include "validate/backends/oracle_runner.hpp"
#if defined(VALIDATE_HAVE_TORCH)
#include "validate/generate/torch_reference.hpp"
#endif

using namespace validate;

namespace {

ops::View view(std::vector<double>& v, const Shape& s) { return ops::dense_view(v, s); }

struct Eval {
  std::map<std::string, std::vector<double>> mem;
  ops::Views views;
  double loss = 0;
};

// Runs the registered reference on `in` (canonical, contiguous) for every tensor of the table.
Eval evaluate(const ops::ConvTransposeParams& p, const std::map<std::string, std::vector<double>>& in) {
  Eval e;
  const ops::OpDef& def = ops::find(ops::Op::conv_transpose2d);
  for (const auto& t : def.tensors(p)) {
    if (t.role == ops::Role::loss) continue;
    auto it = in.find(t.name);
    e.mem[t.name] = it != in.end() ? it->second : std::vector<double>(static_cast<std::size_t>(shape_numel(t.shape)));
  }
  for (const auto& t : def.tensors(p))
    if (t.role != ops::Role::loss) e.views[t.name] = view(e.mem[t.name], t.shape);
  ops::ReferenceOptions opt;
  opt.threads = 3;
  e.loss = def.reference(p, e.views, opt);
  return e;
}

}  // namespace

// x = [[1, 2], [3, 4]], w = [[1, 10], [100, 1000]], stride 2: each input element stamps its
// 2x2 block, y[2i+a][2j+b] = x[i][j] w[a][b]. Padding 1 crops one row/column each side and
// output_padding 1 adds one at the end (zero: nothing reaches it... except the full grid's last).
TEST(ConvTranspose2d, HandComputedStride2PaddingOutputPadding) {
  ops::ConvTransposeParams p;
  p.n = 1, p.c = 1, p.h = 2, p.w = 2, p.o = 1, p.kh = 2, p.kw = 2;
  p.stride = {2, 2}, p.padding = {0, 0}, p.output_padding = {0, 0}, p.dilation = {1, 1}, p.bias = false;
  const std::vector<double> x = {1, 2, 3, 4}, w = {1, 10, 100, 1000};
  {
    auto e = evaluate(p, {{"input", x}, {"weight", w}, {"target", std::vector<double>(16, 0.0)}});
    const std::vector<double> want = {1,   10,   2,   20,   100, 1000, 200, 2000,
                                      3,   30,   4,   40,   300, 3000, 400, 4000};
    EXPECT_EQ(e.mem["output"], want);
  }
  p.padding = {1, 1}, p.output_padding = {1, 1};
  ASSERT_EQ(p.hout(), 3);
  ASSERT_EQ(p.wout(), 3);
  auto e = evaluate(p, {{"input", x}, {"weight", w}, {"target", std::vector<double>(9, 0.0)}});
  const std::vector<double> want = {1000, 200, 2000, 30, 4, 40, 3000, 400, 4000};
  EXPECT_EQ(e.mem["output"], want);
  // loss = mean(y^2) against a zero target.
  double ss = 0;
  for (double v : want) ss += v * v;
  EXPECT_DOUBLE_EQ(e.loss, ss / 9);
}

// Every gradient of the float64 reference against central differences of its own loss, on a
// geometry with stride 2, output_padding, dilation, groups 2, bias, batch 2, all sizes different.
TEST(ConvTranspose2d, GradientsMatchFiniteDifferences) {
  ops::ConvTransposeParams p;
  p.n = 2, p.c = 4, p.h = 3, p.w = 5, p.o = 6, p.kh = 2, p.kw = 3;
  p.stride = {2, 2}, p.padding = {1, 0}, p.output_padding = {1, 0}, p.dilation = {1, 2}, p.groups = 2, p.bias = true;
  ASSERT_TRUE(ops::find(ops::Op::conv_transpose2d).check(p, "test"));
  std::map<std::string, std::vector<double>> in;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  for (const auto& t : ops::find(ops::Op::conv_transpose2d).tensors(p))
    if (t.role == ops::Role::input)
      for (std::int64_t i = 0; i < shape_numel(t.shape); ++i) in[t.name].push_back(u(rng));
  const Eval base = evaluate(p, in);
  for (const char* name : {"input", "weight", "bias"}) {
    const auto& g = base.mem.at(std::string("grad_") + name);
    ASSERT_EQ(g.size(), in[name].size());
    double worst = 0;
    for (std::size_t i = 0; i < g.size(); i += 3) {
      const double h = 1e-5, keep = in[name][i];
      in[name][i] = keep + h;
      const double up = evaluate(p, in).loss;
      in[name][i] = keep - h;
      const double down = evaluate(p, in).loss;
      in[name][i] = keep;
      worst = std::max(worst, std::fabs((up - down) / (2 * h) - g[i]));
    }
    EXPECT_LT(worst, 1e-8) << name;
  }
}

// The narrow-accumulation option rounds the running sum: float16 accumulation of the hand case
// (products up to 4000, sums exact in float16 up to 2048 only) differs from float64, float64 does not.
TEST(ConvTranspose2d, AccumulationOptionRoundsTheRunningSum) {
  ops::ConvTransposeParams p;
  p.n = 1, p.c = 3, p.h = 1, p.w = 1, p.o = 1, p.kh = 1, p.kw = 1, p.padding = {0, 0}, p.bias = false;
  const ops::OpDef& def = ops::find(ops::Op::conv_transpose2d);
  std::vector<double> x = {2049, 1, 1}, w = {1, 1, 1}, t = {0}, y = {0};
  ops::Views v = {{"input", view(x, {1, 3, 1, 1})}, {"weight", view(w, {3, 1, 1, 1})},
                  {"target", view(t, {1, 1, 1, 1})}, {"output", view(y, {1, 1, 1, 1})}};
  ops::ReferenceOptions opt;
  def.reference(p, v, opt);
  EXPECT_EQ(y[0], 2051);
  opt.accumulation = ops::Accumulation::float16;  // 2049 -> 2048, +1 -> 2048 (ties to even), +1 -> 2048
  def.reference(p, v, opt);
  EXPECT_EQ(y[0], 2048);
}

// Case files: "op" selects the op, output_padding is read, a bad output_padding names the case.
TEST(ConvTranspose2d, CaseFileSelectsTheOpAndChecksOutputPadding) {
  auto f = cases::load_case_file(std::string(VALIDATE_SOURCE_DIR) + "/cases/conv_transpose2d.json");
  ASSERT_TRUE(f) << f.message();
  ASSERT_EQ(f->cases.size(), 2u);
  const auto& c = f->cases[0];
  ASSERT_EQ(c.ops.size(), 1u);
  EXPECT_EQ(c.ops[0].op(), cases::Op::conv_transpose2d);
  const auto& p = c.params<cases::ConvTransposeParams>();
  EXPECT_EQ(p.output_padding[0], 1);
  EXPECT_EQ(p.hout(), 9);
  EXPECT_EQ(p.wout(), 18);
  EXPECT_EQ(c.tensors(cases::Op::conv_transpose2d)[1].shape, (Shape{4, 3, 2, 5}));  // IOHW
  EXPECT_EQ(c.tensors(cases::Op::conv_transpose2d)[1].canonical_axes, "IOHW");
  auto bad = cases::parse_case_file(
      Json::parse(R"({"cases": [{"name": "x", "op": "conv_transpose2d", "stride": 1, "output_padding": 1}]})"),
      "f.json");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("f.json cases[0]: output_padding 1 must be smaller than stride 1"), std::string::npos)
      << bad.message();
  auto unknown = cases::parse_case_file(Json::parse(R"({"cases": [{"op": "conv3d"}]})"), "f.json");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.message().find("'op' must be one of conv2d, matmul, conv_transpose2d"), std::string::npos)
      << unknown.message();
}

// The oracle's layouts are invisible in its results: every preset gives the canonical bytes.
TEST(ConvTranspose2d, OracleResultsDoNotDependOnTheLayout) {
  auto f = cases::load_case_file(std::string(VALIDATE_SOURCE_DIR) + "/cases/conv_transpose2d.json");
  ASSERT_TRUE(f) << f.message();
  for (const auto& c : f->cases) {
    const auto in = validate::testing::make_inputs(c, cases::Op::conv_transpose2d, 11);
    std::map<std::string, Tensor> first;
    for (const char* preset : {"torch", "channels_last", "fortran"}) {
      auto set = layout::load_layout(preset);
      ASSERT_TRUE(set);
      auto out = runners::oracle_compute(c, cases::Op::conv_transpose2d, in.view(), set->ops.at("conv_transpose2d"),
                                         DType::float32, 2);
      ASSERT_TRUE(out) << out.message();
      if (first.empty()) {
        first = std::move(*out);
        continue;
      }
      for (const auto& [name, t] : *out) EXPECT_EQ(tensor_sha256(t), tensor_sha256(first.at(name))) << preset << " " << name;
    }
  }
}

#if defined(VALIDATE_HAVE_TORCH)
// LibTorch in float64 (an independent implementation) against the float64 oracle on the odd
// cases: forward, loss, grad_input, grad_weight, grad_bias.
TEST(ConvTranspose2d, OracleMatchesLibTorchInFloat64) {
  auto f = cases::load_case_file(std::string(VALIDATE_SOURCE_DIR) + "/cases/conv_transpose2d.json");
  ASSERT_TRUE(f) << f.message();
  auto dev = generate::open_torch_device("cpu", false, 2);
  ASSERT_TRUE(dev);
  for (auto c : f->cases) {
    const auto in = validate::testing::make_inputs(c, cases::Op::conv_transpose2d, 12);  // float32 storage
    c.dtype = DType::float64;  // LibTorch computes in double
    auto torch_out = generate::torch_compute(c, cases::Op::conv_transpose2d, in.view(), *dev, nullptr);
    ASSERT_TRUE(torch_out) << torch_out.message();
    auto oracle_out = runners::oracle_compute(c, cases::Op::conv_transpose2d, in.view(), {}, DType::float64, 2);
    ASSERT_TRUE(oracle_out) << oracle_out.message();
    ASSERT_EQ(torch_out->size(), oracle_out->size());
    for (const auto& [name, want] : *torch_out) {
      const Tensor& got = oracle_out->at(name);
      ASSERT_EQ(got.shape(), want.shape()) << c.name << " " << name;
      double worst = 0, scale = 0;
      for (std::int64_t i = 0; i < want.numel(); ++i) {
        worst = std::max(worst, std::fabs(got.get(i) - want.get(i)));
        scale = std::max(scale, std::fabs(want.get(i)));
      }
      // The output is LibTorch's float64 arithmetic; the loss (and so dL/dy and every gradient)
      // is taken on the output upcast to float32, as every backend takes it, so they agree to float32.
      const double tol = name == "output" ? 1e-12 : 1e-6;
      EXPECT_LE(worst, tol * std::max(scale, 1e-30)) << c.name << " " << name;
      EXPECT_GT(scale, 0) << c.name << " " << name;  // a test of all zeros would prove nothing
    }
  }
}
#endif
