// The trajectory gate on real trajectories (docs/training.md, decision 5): a conv2d trained with the
// op's float64 reference is the exact side; a float32 stack (float32 parameters, optimizer and
// running sums: ReferenceOptions::accumulation) is clean drift; the same float32 stack applying dW
// as if its KRSC bytes were OIHW is the classic planted mistake. Across seeds and learning rates the
// gate passes every clean run and fails every planted one at step 1, classified a mistake.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "validate/cases/case.hpp"
#include "validate/generate/inputs.hpp"
#include "validate/ops/registry.hpp"
#include "validate/train/trajectory.hpp"
#include "validate/train/trajectory_gate.hpp"

namespace validate::train {
namespace {

cases::Case training_case(double lr) {
  ops::ConvParams p;
  p.n = 2, p.c = 6, p.h = 7, p.w = 9, p.o = 8, p.kh = 3, p.kw = 2, p.groups = 2, p.bias = true;
  p.padding = {1, 1};
  cases::Case c;
  c.name = "traj";
  c.ops = {cases::OpInstance{p}};
  TrainConfig t;
  t.steps = 30;
  t.lr = lr;
  t.momentum = 0.9;
  t.weight_decay = 1e-4;
  c.train = t;
  return c;
}

std::vector<double> doubles(const Tensor& t) {
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = t.get(static_cast<std::int64_t>(i));
  return v;
}

// One step of the op's reference on dense canonical buffers: accumulation in `acc`, every produced
// value rounded to `round` (float64: none).
template <class T>
Result<StepOutcome<T>> reference_step(const cases::Case& c, std::uint64_t seed, std::int64_t s, const Tensors<T>& params,
                                      ops::Accumulation acc, bool krsc_dw) {
  const auto& p = c.params<ops::ConvParams>();
  auto drawn = generate::make_inputs(c, cases::Op::conv2d, seed, generate::Fill::random, 1, s);
  std::map<std::string, std::vector<double>> buf;
  ops::Views v;
  for (const auto& t : c.tensors(cases::Op::conv2d)) {
    if (t.role == ops::Role::loss || t.role == ops::Role::loss_curve || t.role == ops::Role::checkpoint) continue;
    std::vector<double>& b = buf[t.name];
    if (t.parameter) b.assign(params.at(t.name).begin(), params.at(t.name).end());
    else if (t.role == ops::Role::input) b = doubles(drawn.at(t.name));
    else b.assign(static_cast<std::size_t>(shape_numel(t.shape)), 0.0);
    v.emplace(t.name, ops::dense_view(b, t.shape));
  }
  ops::ReferenceOptions opt;
  opt.accumulation = acc;
  opt.loss_on = acc == ops::Accumulation::float64 ? DType::float64 : DType::float32;
  StepOutcome<T> o;
  o.loss = ops::find(cases::Op::conv2d).reference(c.ops[0].params, v, opt);
  for (const char* g : {"grad_weight", "grad_bias"}) o.grads[g].assign(buf[g].begin(), buf[g].end());
  if (krsc_dw) {
    // The program's dW bytes are in KRSC (O, KH, KW, I/g) order; it applies them to OIHW weights
    // element by element, as if they were OIHW.
    const std::int64_t O = p.o, I = p.c / p.groups, KH = p.kh, KW = p.kw;
    std::vector<T> bytes(o.grads["grad_weight"].size());
    for (std::int64_t oo = 0; oo < O; ++oo)
      for (std::int64_t i = 0; i < I; ++i)
        for (std::int64_t y = 0; y < KH; ++y)
          for (std::int64_t x = 0; x < KW; ++x)
            bytes[static_cast<std::size_t>(((oo * KH + y) * KW + x) * I + i)] =
                o.grads["grad_weight"][static_cast<std::size_t>(((oo * I + i) * KH + y) * KW + x)];
    o.grads["grad_weight"] = bytes;
  }
  return o;
}

template <class T>
std::vector<double> losses(const cases::Case& c, std::uint64_t seed, ops::Accumulation acc, bool krsc_dw) {
  auto in = generate::make_inputs(c, cases::Op::conv2d, seed, generate::Fill::random, 1, 0);
  Tensors<T> params;
  for (const char* n : {"weight", "bias"}) {
    const auto d = doubles(in.at(n));
    params[n].assign(d.begin(), d.end());
  }
  auto traj = run_trajectory<T>(*c.train, params, [&](std::int64_t s, const Tensors<T>& now) {
    return reference_step<T>(c, seed, s, now, acc, krsc_dw);
  });
  EXPECT_TRUE(traj) << traj.message();
  return traj ? traj->losses : std::vector<double>{};
}

TEST(TrajectoryGate, PassesCleanFloat32AndFailsAKrscUpdateAtStep1AcrossSeedsAndRates) {
  for (double lr : {0.01, 0.05, 0.2}) {
    const cases::Case c = training_case(lr);
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      SCOPED_TRACE("lr " + std::to_string(lr) + " seed " + std::to_string(seed));
      const auto exact = losses<double>(c, seed, ops::Accumulation::float64, false);
      const auto clean = losses<float>(c, seed, ops::Accumulation::float32, false);
      const auto planted = losses<float>(c, seed, ops::Accumulation::float32, true);
      ASSERT_EQ(exact.size(), 30u);
      const auto ok = classify_divergence(relative_errors(clean, exact), 1e-6);
      if (std::getenv("VALIDATE_TRAJ_PRINT")) { double m = 0; for (double e : relative_errors(clean, exact)) m = std::max(m, e); std::printf("lr %g seed %d clean max %.2e planted step1 %.2e\n", lr, (int)seed, m, relative_errors(planted, exact)[1]); }
      EXPECT_EQ(ok.kind, Divergence::Kind::none) << ok.sentence();
      // The float32 stack is not the float64 one: the test would pass vacuously otherwise.
      EXPECT_GT(relative_errors(clean, exact)[29], 0.0);
      const auto bad = classify_divergence(relative_errors(planted, exact), 1e-6);
      EXPECT_EQ(bad.kind, Divergence::Kind::mistake) << bad.sentence();
      EXPECT_EQ(bad.first_bad_step, 1) << bad.sentence();
      EXPECT_EQ(relative_errors(planted, exact)[0], relative_errors(clean, exact)[0]);  // step 0 is the same
    }
  }
}

}  // namespace
}  // namespace validate::train
