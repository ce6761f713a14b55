// The oracle against an independent float64 statement of the definitions (a direct 7-nested-loop
// conv, triple-loop matmul, written here without sharing anything with the runner), in every
// preset and in a hand-made layout full of flips; the layout must be invisible in its results.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/temp_dir.hpp"
#include "runners/runner_test_util.hpp"
#include "validate/cases/refset.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/npy.hpp"
#include "validate/layout/preset.hpp"
#include "validate/backends/oracle_runner.hpp"

namespace validate {
namespace {

using testing::conv_case;
using testing::conv_params;
using testing::make_inputs;
using testing::make_task;
using testing::matmul_case;

using Vec = std::vector<double>;
using Naive = std::map<std::string, Vec>;  // canonical C order; "loss" has one element

Vec as_doubles(const Tensor& t) {
  Vec v(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) v[static_cast<std::size_t>(i)] = t.get(i);
  return v;
}

// PyTorch's conv2d (cross-correlation), its MSE loss and gradients, straight from the definition.
Naive naive_conv(const cases::ConvParams& p, const std::map<std::string, Tensor>& in) {
  const Vec x = as_doubles(in.at("input")), w = as_doubles(in.at("weight")),
            t = as_doubles(in.at("target"));
  const Vec b = p.bias ? as_doubles(in.at("bias")) : Vec(static_cast<std::size_t>(p.o), 0.0);
  const std::int64_t Ho = p.hout(), Wo = p.wout(), Cg = p.c / p.groups, Og = p.o / p.groups;
  auto X = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t ww) {
    return ((n * p.c + c) * p.h + h) * p.w + ww;
  };
  auto W = [&](std::int64_t o, std::int64_t ci, std::int64_t kh, std::int64_t kw) {
    return ((o * Cg + ci) * p.kh + kh) * p.kw + kw;
  };
  auto Y = [&](std::int64_t n, std::int64_t o, std::int64_t h, std::int64_t ww) {
    return ((n * p.o + o) * Ho + h) * Wo + ww;
  };
  Naive r;
  Vec& y = r["output"];
  y.assign(static_cast<std::size_t>(p.n * p.o * Ho * Wo), 0.0);
  for (std::int64_t n = 0; n < p.n; ++n)
    for (std::int64_t o = 0; o < p.o; ++o)
      for (std::int64_t oh = 0; oh < Ho; ++oh)
        for (std::int64_t ow = 0; ow < Wo; ++ow) {
          double s = 0;
          for (std::int64_t ci = 0; ci < Cg; ++ci)
            for (std::int64_t kh = 0; kh < p.kh; ++kh)
              for (std::int64_t kw = 0; kw < p.kw; ++kw) {
                const std::int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
                const std::int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
                if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
                s += x[X(n, o / Og * Cg + ci, ih, iw)] * w[W(o, ci, kh, kw)];
              }
          y[Y(n, o, oh, ow)] = s + b[o];
        }
  double loss = 0;
  Vec dy(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) {
    loss += (y[i] - t[i]) * (y[i] - t[i]);
    dy[i] = 2 * (y[i] - t[i]) / static_cast<double>(y.size());
  }
  r["loss"] = {loss / static_cast<double>(y.size())};
  Vec& gx = r["grad_input"];
  Vec& gw = r["grad_weight"];
  gx.assign(x.size(), 0.0);
  gw.assign(w.size(), 0.0);
  for (std::int64_t n = 0; n < p.n; ++n)
    for (std::int64_t o = 0; o < p.o; ++o)
      for (std::int64_t oh = 0; oh < Ho; ++oh)
        for (std::int64_t ow = 0; ow < Wo; ++ow)
          for (std::int64_t ci = 0; ci < Cg; ++ci)
            for (std::int64_t kh = 0; kh < p.kh; ++kh)
              for (std::int64_t kw = 0; kw < p.kw; ++kw) {
                const std::int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
                const std::int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
                if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
                const std::int64_t c = o / Og * Cg + ci;
                gx[X(n, c, ih, iw)] += w[W(o, ci, kh, kw)] * dy[Y(n, o, oh, ow)];
                gw[W(o, ci, kh, kw)] += x[X(n, c, ih, iw)] * dy[Y(n, o, oh, ow)];
              }
  if (p.bias) {
    Vec& gb = r["grad_bias"];
    gb.assign(static_cast<std::size_t>(p.o), 0.0);
    for (std::int64_t n = 0; n < p.n; ++n)
      for (std::int64_t o = 0; o < p.o; ++o)
        for (std::int64_t i = 0; i < Ho * Wo; ++i) gb[o] += dy[Y(n, o, 0, 0) + i];
  }
  return r;
}

Naive naive_matmul(const cases::MatmulParams& p, const std::map<std::string, Tensor>& in) {
  const Vec a = as_doubles(in.at("A")), b = as_doubles(in.at("B")), t = as_doubles(in.at("target"));
  const std::int64_t M = p.m, K = p.k, N = p.n;
  Naive r;
  Vec& y = r["output"];
  y.assign(static_cast<std::size_t>(M * N), 0.0);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t k = 0; k < K; ++k) y[m * N + n] += a[m * K + k] * b[k * N + n];
  double loss = 0;
  Vec dy(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) {
    loss += (y[i] - t[i]) * (y[i] - t[i]);
    dy[i] = 2 * (y[i] - t[i]) / static_cast<double>(y.size());
  }
  r["loss"] = {loss / static_cast<double>(y.size())};
  Vec& ga = r["grad_A"];
  Vec& gb = r["grad_B"];
  ga.assign(a.size(), 0.0);
  gb.assign(b.size(), 0.0);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t n = 0; n < N; ++n) {
        ga[m * K + k] += dy[m * N + n] * b[k * N + n];
        gb[k * N + n] += a[m * K + k] * dy[m * N + n];
      }
  return r;
}

// |got - want| <= rel * max|want| for every element (normwise relative: a layout mistake moves
// values by O(1), float64 rounding by ~1e-16).
void expect_close(const Tensor& got, const Vec& want, double rel, const std::string& what) {
  ASSERT_EQ(static_cast<std::size_t>(got.numel()), want.size()) << what;
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  const double tol = rel * std::max(scale, 1e-300);
  int bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = got.get(static_cast<std::int64_t>(i));
    if (!(std::abs(g - want[i]) <= tol) && bad++ < 3)
      ADD_FAILURE() << what << "[" << i << "]: oracle " << g << ", definition " << want[i]
                    << " (tolerance " << tol << ")";
  }
}

struct OracleCase {
  std::string name;
  cases::Case c;
  cases::Op op;
};

std::vector<OracleCase> oracle_cases() {
  std::vector<OracleCase> v;
  auto conv = [&](const std::string& n, const cases::ConvParams& p, DType dt) {
    v.push_back({n, conv_case(n, p, dt), cases::Op::conv2d});
  };
  // Every axis a different size; stride, padding, dilation different in H and W.
  conv("g2_nobias", conv_params(2, 6, 7, 9, 4, 3, 2, {2, 1}, {1, 0}, {1, 2}, 2, false),
       DType::float32);
  conv("bias_o7", conv_params(3, 5, 11, 6, 7, 2, 3, {1, 2}, {0, 1}, {2, 1}, 1, true),
       DType::float32);
  // Depthwise-style (groups = C), padding wider than the kernel's half.
  conv("depthwise", conv_params(2, 3, 8, 5, 6, 3, 3, {1, 1}, {2, 1}, {1, 1}, 3, true),
       DType::float32);
  // Strides larger than the kernel (input positions never read), 9 outputs per group (block +
  // tail).
  conv("sparse_g2_o18", conv_params(1, 4, 10, 13, 18, 1, 4, {3, 2}, {0, 2}, {1, 1}, 2, true),
       DType::float32);
  conv("f16_bias", conv_params(2, 3, 6, 5, 5, 3, 2, {1, 1}, {1, 1}, {1, 1}, 1, true),
       DType::float16);
  conv("bf16_g3", conv_params(1, 6, 5, 7, 9, 2, 2, {2, 1}, {1, 0}, {1, 3}, 3, true),
       DType::bfloat16);
  auto mm = [&](const std::string& n, std::int64_t m, std::int64_t k, std::int64_t nn, DType dt) {
    v.push_back({n, matmul_case(n, m, k, nn, dt), cases::Op::matmul});
  };
  mm("mm_5x7x3", 5, 7, 3, DType::float32);
  mm("mm_13x300x6", 13, 300, 6, DType::float32);  // two K blocks
  mm("mm_130x9x11", 130, 9, 11, DType::float32);  // several row blocks
  mm("mm_f16_9x17x4", 9, 17, 4, DType::float16);
  return v;
}

// A hand-made layout set where nearly every tensor is permuted, column-major and/or flipped.
layout::LayoutSet twisted_layouts(const std::string& dir) {
  const std::string path = dir + "/twisted.json";
  const char* text =
      R"({"conv2d": {"input": "WCNH:F+flip=HW", "weight": "IWOH+flip=IW", "bias": "O+flip=O",
      "target": "HWNC", "output": "CNWH:F+flip=N", "grad_input": "NCHW+flip=C", "grad_weight": "HWIO:F",
      "grad_bias": "O"},
    "matmul": {"A": "KM+flip=M", "B": "NK:F+flip=K", "target": "NM", "output": "MN+flip=MN",
      "grad_A": "MK:F+flip=K", "grad_B": "KN+flip=N"}})";
  EXPECT_TRUE(fs::write_atomic(path, text));
  auto s = layout::load_layout(path);
  EXPECT_TRUE(s.is_ok()) << (s ? "" : s.message());
  return s ? *s : layout::LayoutSet{};
}

std::vector<std::pair<std::string, layout::LayoutSet>> all_layouts(const std::string& dir) {
  std::vector<std::pair<std::string, layout::LayoutSet>> v;
  for (const auto& p : layout::preset_names()) v.emplace_back(p, *layout::load_layout(p));
  v.emplace_back("twisted", twisted_layouts(dir));
  return v;
}

TEST(Oracle, MatchesTheDefinitionInEveryLayout) {
  testing::TempDir tmp("oracle_def");
  const auto layouts = all_layouts(tmp.path());
  for (const auto& oc : oracle_cases()) {
    const auto in = make_inputs(oc.c, oc.op, 7);
    const Naive want = oc.op == cases::Op::conv2d ? naive_conv(oc.c.params<cases::ConvParams>(), in.owned)
                                                  : naive_matmul(oc.c.params<cases::MatmulParams>(), in.owned);
    for (const auto& [lname, set] : layouts) {
      SCOPED_TRACE(oc.name + " in " + lname);
      auto got = runners::oracle_compute(oc.c, oc.op, in.view(), set.ops.at(cases::op_name(oc.op)),
                                         DType::float64, 2);
      ASSERT_TRUE(got.is_ok()) << got.message();
      ASSERT_EQ(got->size(), want.size());
      for (const auto& [name, w] : want) {
        ASSERT_TRUE(got->count(name)) << name;
        EXPECT_EQ(got->at(name).dtype(), DType::float64);
        expect_close(got->at(name), w, 1e-12, name);
      }
      EXPECT_EQ(got->at("loss").dim(), 0);
    }
  }
}

// Through the runner (rounded results, storage dtypes): every layout gives the same bits, for any
// thread count. A conversion that disagreed with its spec would change them.
TEST(Oracle, LayoutAndThreadsAreInvisibleInTheResults) {
  testing::TempDir tmp("oracle_inv");
  const auto layouts = all_layouts(tmp.path());
  for (const auto& oc : oracle_cases()) {
    const auto in = make_inputs(oc.c, oc.op, 11);
    const auto task = make_task(oc.c, oc.op, in);
    std::map<std::string, Tensor> first;
    for (int threads : {1, 3}) {
      for (const auto& [lname, set] : layouts) {
        SCOPED_TRACE(oc.name + " in " + lname + ", threads " + std::to_string(threads));
        auto runner = runners::make_oracle_runner(set, {threads});
        auto res = runner->run(task);
        ASSERT_EQ(res.size(), 1u);
        ASSERT_EQ(res[0].outcome, runners::RunOutcome::ok) << res[0].message;
        EXPECT_EQ(res[0].info["compute"], "float64");
        const auto& specs = set.ops.at(cases::op_name(oc.op));
        for (const auto& [t, spec] : res[0].info["layouts"].items())
          EXPECT_EQ(spec.get<std::string>(), layout::to_string(specs.find(t)->second)) << t;
        const DType storage = storage_dtype(oc.c.dtype);
        for (const auto& t : oc.c.produced(oc.op)) {
          ASSERT_TRUE(res[0].outputs.count(t.name)) << t.name;
          const Tensor& got = res[0].outputs.at(t.name);
          EXPECT_EQ(got.shape(), t.shape) << t.name;
          EXPECT_EQ(got.dtype(), t.role == cases::Role::loss ? DType::float32 : storage) << t.name;
          auto it = first.find(t.name);
          if (it == first.end()) {
            first.emplace(t.name, got.clone());
            continue;
          }
          EXPECT_EQ(std::memcmp(got.bytes(), it->second.bytes(), got.nbytes()), 0)
              << t.name << " differs from torch's";
        }
      }
    }
  }
}

// As a runner the oracle's loss is every backend's: the MSE of the output as the case's dtype holds it
// (exact output rounded once to bfloat16/float16), like the reference's. On the exact output it
// would differ by the output rounding: ~1e-4 relative on a small bfloat16 case, 100x the gate.
TEST(Oracle, RunnerLossIsTakenOnTheOutputInTheCaseDtype) {
  for (DType dt : {DType::bfloat16, DType::float16, DType::float32}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    auto c = matmul_case("loss_on_rounded", 56, 18, 4, dt);
    const auto in = make_inputs(c, cases::Op::matmul, 5);
    const Naive exact = naive_matmul(c.params<cases::MatmulParams>(), in.owned);
    double on_rounded = 0;
    const Vec& y = exact.at("output");
    const Tensor& t = in.owned.at("target");
    for (std::size_t i = 0; i < y.size(); ++i) {
      const double d = round_to_dtype(y[i], dt) - t.get(static_cast<std::int64_t>(i));
      on_rounded += d * d;
    }
    on_rounded /= static_cast<double>(y.size());
    auto got = runners::oracle_compute(c, cases::Op::matmul, in.view(),
                                       layout::load_layout("torch")->ops.at("matmul"),
                                       storage_dtype(dt), 1);
    ASSERT_TRUE(got.is_ok()) << got.message();
    const double loss = got->at("loss").get(0);
    EXPECT_NEAR(loss, on_rounded, 1e-7 * on_rounded);
    if (dt != DType::float32) {  // the test can tell the two definitions apart
      EXPECT_GT(std::abs(exact.at("loss")[0] - on_rounded), 1e-6 * on_rounded);
    }
    // float64 results keep the exact output, and so the exact loss.
    auto exact_mode = runners::oracle_compute(c, cases::Op::matmul, in.view(),
                                              layout::load_layout("torch")->ops.at("matmul"),
                                              DType::float64, 1);
    ASSERT_TRUE(exact_mode.is_ok());
    EXPECT_NEAR(exact_mode->at("loss").get(0), exact.at("loss")[0], 1e-14 * on_rounded);
  }
}

// The rounded results are the float64 results rounded once (float16: not through float32).
TEST(Oracle, RoundsOnceToTheStorageDtype) {
  // 1 + 2^-11 + 2^-40: nearest half is 1 + 2^-10; through float32 it would become 1 + 2^-11, a tie,
  // -> 1.
  const double v = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(runners::double_to_float16_bits(v), 0x3C01);
  EXPECT_EQ(float_to_float16_bits(static_cast<float>(v)), 0x3C00);
  // Every float agrees with the float32 converter (floats convert exactly to double).
  std::mt19937 rng(3);
  for (int i = 0; i < 200000; ++i) {
    std::uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(runners::double_to_float16_bits(f), float_to_float16_bits(f)) << f;
  }
  for (float f : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 6e-8f, 2.98e-8f, 2.99e-8f,
                  6.1e-5f, 6.097e-5f, 1e-10f, INFINITY, -INFINITY})
    EXPECT_EQ(runners::double_to_float16_bits(f), float_to_float16_bits(f)) << f;
  EXPECT_EQ(runners::double_to_float16_bits(NAN) & 0x7e00, 0x7e00);

  // The same value out of the oracle: A = [1, 2^-11, 2^-24], B = [1, 1, 2^-16]^T in float16.
  auto c = matmul_case("round_once", 1, 3, 1, DType::float16);
  testing::Inputs in;
  const double a[] = {1.0, std::ldexp(1.0, -11), std::ldexp(1.0, -24)},
               b[] = {1.0, 1.0, std::ldexp(1.0, -16)};
  in.owned.emplace("A", Tensor(DType::float16, {1, 3}));
  in.owned.emplace("B", Tensor(DType::float16, {3, 1}));
  in.owned.emplace("target", Tensor(DType::float16, {1, 1}));
  for (int k = 0; k < 3; ++k) {
    in.owned.at("A").set(k, a[k]);
    in.owned.at("B").set(k, b[k]);
    ASSERT_EQ(in.owned.at("A").get(k), a[k]);
    ASSERT_EQ(in.owned.at("B").get(k), b[k]);
  }
  auto res = runners::make_oracle_runner(*layout::load_layout("fortran"))
                 ->run(make_task(c, cases::Op::matmul, in));
  ASSERT_EQ(res[0].outcome, runners::RunOutcome::ok) << res[0].message;
  EXPECT_EQ(res[0].outputs.at("output").data<std::uint16_t>()[0], 0x3C01);
}

TEST(Oracle, SkipsOpsTheLayoutFileLeavesOut) {
  testing::TempDir tmp("oracle_skip");
  ASSERT_TRUE(fs::write_atomic(tmp / "mm.json", R"({"matmul": {"B": "NK"}})"));
  auto set = layout::load_layout(tmp / "mm.json");
  ASSERT_TRUE(set.is_ok()) << set.message();
  auto c = conv_case("skip", conv_params(1, 2, 4, 5, 3, 2, 2, {1, 1}, {0, 0}, {1, 1}, 1, true),
                     DType::float32);
  const auto in = make_inputs(c, cases::Op::conv2d, 1);
  auto runner = runners::make_oracle_runner(*set);
  auto res = runner->run(make_task(c, cases::Op::conv2d, in));
  ASSERT_EQ(res.size(), 1u);
  EXPECT_EQ(res[0].outcome, runners::RunOutcome::skipped);
  EXPECT_EQ(res[0].message, "op not in the layout file");
  const auto min = make_inputs(c, cases::Op::matmul, 1);
  EXPECT_EQ(runner->run(make_task(c, cases::Op::matmul, min))[0].outcome, runners::RunOutcome::ok);
}

TEST(Oracle, RejectsMisShapedInputs) {
  auto c = matmul_case("bad", 3, 4, 5, DType::float32);
  auto in = make_inputs(c, cases::Op::matmul, 1);
  in.owned.at("B").reshape({5, 4});
  auto res = runners::make_oracle_runner(*layout::load_layout("torch"))
                 ->run(make_task(c, cases::Op::matmul, in));
  EXPECT_EQ(res[0].outcome, runners::RunOutcome::error);
  EXPECT_NE(res[0].message.find("'B' has shape [5, 4], expected [4, 5]"), std::string::npos)
      << res[0].message;
}

// The oracle agrees with LibTorch's float32 reference on the committed smoke set: the definitions
// above and the oracle could share a misreading of conv2d (say, a true convolution), LibTorch
// cannot.
// The oracle (float64, in each preset's layouts) against the LibTorch reference on the committed
// smoke set: the float32 loss within the default 1e-6 loss gate, tensors within a few float32
// ulps of their largest value, for every float32 case in every preset.
TEST(Oracle, AgreesWithTheCommittedSmokeReference) {
  const std::string ref = std::string(VALIDATE_SOURCE_DIR) + "/references/smoke";
  if (!fs::exists(ref + "/manifest.json")) GTEST_SKIP() << "no " << ref;
  auto all = cases::load_cases(ref);
  ASSERT_TRUE(all.is_ok()) << all.message();
  int checked = 0;
  for (const auto& preset : layout::preset_names()) {
    auto runner = runners::make_oracle_runner(*layout::load_layout(preset));
    for (const auto& rc : *all) {
      if (rc.c.dtype != DType::float32) continue;
      for (cases::Op op : {cases::Op::conv2d, cases::Op::matmul}) {
        SCOPED_TRACE(preset + ": " + rc.c.name + " " + cases::op_name(op));
        std::map<std::string, Tensor> inputs;
        for (const auto& t : rc.c.inputs(op)) {
          auto x = npy::read(rc.dtype_dir + "/" + rc.c.file_name(op, t.name));
          ASSERT_TRUE(x.is_ok()) << x.message();
          inputs.emplace(t.name, std::move(*x));
        }
        runners::OpTask task;
        task.c = &rc.c;
        task.op = op;
        for (auto& [k, v] : inputs) task.inputs[k] = &v;
        auto res = runner->run(task);
        if (res[0].outcome == runners::RunOutcome::skipped) continue;  // op not in this preset
        ASSERT_EQ(res[0].outcome, runners::RunOutcome::ok) << res[0].message;
        for (const auto& t : rc.c.produced(op)) {
          auto want = npy::read(rc.dtype_dir + "/" + rc.c.file_name(op, t.name));
          ASSERT_TRUE(want.is_ok()) << want.message();
          if (t.role == cases::Role::loss) {
            EXPECT_NEAR(res[0].outputs.at(t.name).get(0), want->get(0), 1e-6) << "float32 loss gate";
          } else {
            // float32 LibTorch vs float64: a few float32 ulps of the largest value, far below any
            // layout mistake.
            expect_close(res[0].outputs.at(t.name), as_doubles(*want), 1e-5, t.name);
          }
        }
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 4 * 3);  // 3 float32 cases x 2 ops in every preset that has the op
}

}  // namespace
}  // namespace validate
