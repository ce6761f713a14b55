// A run's declared algorithm where it reaches beyond one tensor's own bound (docs/compare.md,
// "Algorithm-aware bounds" and "Loss bounds"): the output's Winograd error carried into the loss,
// and conv_transpose2d judged as the backward-data pass of its conv2d. Expected terms come from the
// metrics' models evaluated on operands these tests map by hand (x, w, dL/dy and, for the
// transposed op, the conv2d it is the backward-data pass of), never from compare's own mapping.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "../common/temp_dir.hpp"
#include "fixture.hpp"
#include "validate/compare/compare.hpp"
#include "validate/metrics/algorithm_bounds.hpp"
#include "validate/report/reporter.hpp"

using namespace validate;
using namespace validate::testing;
namespace vc = validate::compare;

namespace {

const Json& entry(const Json& j, const std::string& id) {
  for (const auto& e : j["entries"])
    if (e["id"] == id) return e;
  static const Json none;
  ADD_FAILURE() << "no entry " << id;
  return none;
}

const Json& check_of(const Json& e, const std::string& name) {
  for (const auto& c : e["checks"])
    if (c["name"] == name) return c;
  static const Json none;
  ADD_FAILURE() << "no check " << name << " in " << e["id"];
  return none;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) v[static_cast<std::size_t>(i)] = t.get(i);
  return v;
}

// dL/dy = 2 (y - t) / N of the reference's output and target.
std::vector<double> dloss(const std::vector<double>& y, const std::vector<double>& t) {
  std::vector<double> d(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) d[i] = 2 * (y[i] - t[i]) / static_cast<double>(y.size());
  return d;
}

// compare of `ref` against a copy whose `tensor` is changed by `mutate`, with conv-like op `op`
// declaring `algorithms`; the JSON report.
// The reference's conv2d output y, target t and the forward's Winograd F(m x m, 3 x 3) term per
// unit lambda of case c, read back from the set at `ref`.
struct ForwardTerm {
  std::vector<double> y, t, term;
};
ForwardTerm forward_term(const std::string& ref, const cases::Case& c, int m) {
  const cases::ConvParams& p = c.params<cases::ConvParams>();
  const auto x = values(read_tensor(ref, c, cases::Op::conv2d, "input"));
  const auto w = values(read_tensor(ref, c, cases::Op::conv2d, "weight"));
  ForwardTerm f;
  f.y = values(read_tensor(ref, c, cases::Op::conv2d, "output"));
  f.t = values(read_tensor(ref, c, cases::Op::conv2d, "target"));
  vc::ConvShape s{p.n, p.c, p.h, p.w, p.o, p.kh, p.kw, p.padding[0], p.padding[1], p.groups};
  f.term = vc::winograd_term(m, vc::ConvPass::forward, s, vc::ConvOperands{&x, &w, nullptr});
  return f;
}

Json compare_declared(const std::string& ref, const std::string& run, const std::string& op, const Json& algorithms,
                      const TensorHook& mutate) {
  RunSpec s;
  s.mutate = mutate;
  s.edit = [&](Json& doc) {
    if (!algorithms.is_null()) doc["ops"][op]["info"]["algorithms"] = algorithms;
  };
  std::filesystem::remove_all(run);
  write_run(ref, run, s);
  vc::CompareOptions opt;
  opt.ref_dir = ref;
  opt.run_dir = run;
  auto r = vc::compare_sets(opt);
  EXPECT_TRUE(r) << r.message();
  return r ? report::render_json(*r) : Json();
}

}  // namespace

// A float32 loss whose output was computed by Winograd F(4x4, 3x3): the fixed loss_abs (1e-6 over
// the loss floor) gains A = sqrt(sum c_i^2 (8 T_i)^2) + mean((8 T_i)^2), c_i = 2 (y_i - t_i) / N,
// T the forward's Winograd term per unit lambda. A run loss one float32 step beyond 1e-6 (and
// within 1e-6 + A) passes with the declaration and fails without it, where the limit is 1e-6 as
// it was before algorithms existed.
TEST(CompareAlgorithmLoss, AWinogradOutputsErrorIsCarriedIntoTheLoss) {
  TempDir tmp{"algorithm_loss"};
  const std::string ref = tmp / "ref";
  const cases::Case c = small_case(DType::float32);
  write_reference(ref, {c}, {}, /*scales=*/true);
  const float loss = static_cast<float>(read_tensor(ref, c, cases::Op::conv2d, "loss").get(0));
  const auto [y, t, term] = forward_term(ref, c, 4);
  ASSERT_EQ(term.size(), y.size());
  const auto c_i = dloss(y, t);
  double lin2 = 0, sq = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double e = 8 * term[i];
    lin2 += c_i[i] * c_i[i] * e * e, sq += e * e;
  }
  const double a = std::sqrt(lin2) + sq / static_cast<double>(y.size());
  // The first float32 loss more than 1e-6 away from the reference's; the test needs it inside A.
  float run_loss = loss;
  while (static_cast<double>(run_loss) - loss <= 1e-6) run_loss = std::nextafter(run_loss, INFINITY);
  ASSERT_LT(static_cast<double>(run_loss) - loss, 1e-6 + a) << "A = " << a << " is below one float32 step";
  const TensorHook mutate = [&](const std::string& key, Tensor& v) {
    if (key == "float32/" + c.name + "/conv2d/loss") v.set(0, run_loss);
  };
  const std::string id = "float32/" + c.name + "/conv2d/loss";

  const Json declared = compare_declared(ref, tmp / "run_w", "conv2d", {{"output", "winograd_f4"}}, mutate);
  const Json& le = entry(declared, id);
  const Json& ck = check_of(le, "loss_abs");
  EXPECT_NEAR(ck["limit"].get<double>(), 1e-6 + a, 1e-12 * (1e-6 + a));
  EXPECT_TRUE(ck["passed"].get<bool>());
  EXPECT_FALSE(le["failed"].get<bool>());
  EXPECT_EQ(le["bound_model"], "loss + the output's winograd_f4 error through dL/dy");

  for (const Json& algorithms : {Json(), Json{{"output", "direct"}}, Json{{"grad_input", "winograd_f4"}}}) {
    SCOPED_TRACE(algorithms.dump());
    const Json direct = compare_declared(ref, tmp / "run_d", "conv2d", algorithms, mutate);
    const Json& de = entry(direct, id);
    EXPECT_EQ(check_of(de, "loss_abs")["limit"].get<double>(), 1e-6);
    EXPECT_TRUE(de["failed"].get<bool>());
  }
}

// A bfloat16 loss's derived bound (the outputs' error bounds carried into the loss) gains the
// Winograd output's first-order term sqrt(sum c_i^2 (8 T_i)^2) at least; undeclared it is the
// same bound as with the output declared direct.
TEST(CompareAlgorithmLoss, TheDerivedLossBoundGainsTheOutputsTerm) {
  TempDir tmp{"algorithm_loss_bf16"};
  const std::string ref = tmp / "ref";
  const cases::Case c = small_case(DType::bfloat16);
  write_reference(ref, {c}, {}, /*scales=*/true);
  const auto [y, t, term] = forward_term(ref, c, 6);
  const auto c_i = dloss(y, t);
  double lin2 = 0;
  for (std::size_t i = 0; i < y.size(); ++i) lin2 += c_i[i] * c_i[i] * 64 * term[i] * term[i];
  const std::string id = "bfloat16/" + c.name + "/conv2d/loss";
  auto limit = [&](const Json& algorithms, const std::string& dir) {
    const Json j = compare_declared(ref, tmp / dir, "conv2d", algorithms, {});
    return check_of(entry(j, id), "loss_bound")["limit"].get<double>();
  };
  const double none = limit(Json(), "a"), direct = limit({{"output", "direct"}}, "b"),
               wino = limit({{"output", "winograd_f6"}}, "c");
  EXPECT_EQ(none, direct);
  EXPECT_GE(wino - direct, std::sqrt(lin2) * (1 - 1e-12));
  EXPECT_GT(std::sqrt(lin2), 0);
}

// conv_transpose2d (N 2, in 3, 5 x 6, out 4, 3x3, padding 1) declared winograd_f4: cuDNN computes
// it as the backward-data pass of the conv2d whose output is its input, [2, 3, 5, 6], and whose
// input is its output, [2, 4, 5, 6], with the same weight [3, 4, 3, 3] as OIHW. The bound of one
// output element changed by delta is 2 b + 8 T, T that pass's Winograd term with dL/dy = its
// input; with the output declared direct it is 2 b. Strided, the same declaration has no model.
TEST(CompareAlgorithmTransposed, ConvTransposeIsJudgedAsItsConvsBackwardDataPass) {
  TempDir tmp{"algorithm_transposed"};
  const std::string ref = tmp / "ref";
  cases::Case c;
  c.name = "k0036_ic003";
  c.dtype = DType::float32;
  ops::ConvTransposeParams tp;
  tp.n = 2, tp.c = 3, tp.h = 5, tp.w = 6, tp.o = 4, tp.kh = 3, tp.kw = 3, tp.padding = {1, 1};
  c.ops.push_back(cases::OpInstance{tp});
  write_reference(ref, {c}, {}, /*scales=*/true);
  const auto xt = values(read_tensor(ref, c, cases::Op::conv_transpose2d, "input"));
  const auto w = values(read_tensor(ref, c, cases::Op::conv_transpose2d, "weight"));
  const auto y = values(read_tensor(ref, c, cases::Op::conv_transpose2d, "output"));
  const auto t = values(read_tensor(ref, c, cases::Op::conv_transpose2d, "target"));
  ASSERT_EQ(y.size(), static_cast<std::size_t>(2 * 4 * 5 * 6));
  const vc::ConvShape conv{2, 4, 5, 6, 3, 3, 3, 1, 1, 1};  // n, c, h, w, o, kh, kw, ph, pw, groups
  const auto dy = dloss(y, t);
  const auto term = vc::winograd_term(4, vc::ConvPass::backward_data, conv, vc::ConvOperands{&dy, &w, &xt});
  ASSERT_EQ(term.size(), y.size());
  const std::int64_t at = 37;
  const double delta = 2e-5;
  const TensorHook mutate = [&](const std::string& key, Tensor& v) {
    if (key == "float32/" + c.name + "/conv_transpose2d/output") v.set(at, v.get(at) + delta);
  };
  const std::string id = "float32/" + c.name + "/conv_transpose2d/output";
  const double stored = static_cast<double>(static_cast<float>(y[at] + delta)) - y[at];
  auto bound_at = [&](const Json& j) { return stored / check_of(entry(j, id), "error_bound")["value"].get<double>(); };

  const Json declared = compare_declared(ref, tmp / "run_w", "conv_transpose2d",
                                         {{"output", "winograd_f4"}, {"grad_input", "winograd_f4"}}, mutate);
  const Json direct = compare_declared(ref, tmp / "run_d", "conv_transpose2d", {{"output", "direct"}}, mutate);
  EXPECT_EQ(entry(declared, id)["bound_model"], "direct + winograd F(4x4,3x3)");
  EXPECT_EQ(entry(direct, id)["bound_model"], "direct");
  EXPECT_NEAR(bound_at(declared) - bound_at(direct), 8 * term[at], 1e-9 * 8 * term[at]);
  EXPECT_GT(term[at], 0);
  const Json& gi = entry(declared, "float32/" + c.name + "/conv_transpose2d/grad_input");
  EXPECT_EQ(gi["bound_model"], "direct + winograd F(4x4,3x3) + the output's winograd_f4 error through dL/dy");
  EXPECT_EQ(entry(declared, "float32/" + c.name + "/conv_transpose2d/grad_weight")["bound_model"],
            "direct + the output's winograd_f4 error through dL/dy");

  const std::string sref = tmp / "sref";
  c.ops[0] = cases::OpInstance{[&] {
    ops::ConvTransposeParams s = tp;
    s.stride = {2, 2};
    return s;
  }()};
  write_reference(sref, {c}, {}, /*scales=*/true);
  const Json strided = compare_declared(sref, tmp / "run_s", "conv_transpose2d", {{"output", "winograd_f4"}}, {});
  EXPECT_EQ(entry(strided, id)["bound_model"], "direct (winograd_f4 has no model for output of conv_transpose2d)");
}
