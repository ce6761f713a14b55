// Checkpoints: bitwise policy, step-widened tolerance, gradients and updates in another layout,
// and the roles of training tensors.
#include <gtest/gtest.h>

#include "trajectory_compare_fixture.hpp"

namespace {

TEST_F(Trajectory, BitwisePolicyDemandsAnIdenticalTrajectory) {
  TrainSetup s;
  s.steps = 10;
  const auto exact = simulate<double>(s);
  auto judge = [&](const TrajectoryValues& run_values, const std::string& tag) {
    const std::string ref = tmp / ("ref" + tag), run = tmp / ("run" + tag);
    write_training_sets(ref, run, s, exact, run_values);
    compare::CompareOptions o;
    o.ref_dir = ref;
    o.run_dir = run;
    o.threads = 1;
    EXPECT_TRUE(o.policy.add_file(std::string(VALIDATE_SOURCE_DIR) + "/policies/bitwise.json"));
    auto r = compare::compare_sets(o);
    EXPECT_TRUE(r) << r.message();
    return std::move(*r);
  };
  EXPECT_EQ(judge(exact, "same").exit_code(), 0);
  const compare::Report differs = judge(simulate<float>(s), "f32");
  EXPECT_EQ(differs.exit_code(), 1);
  int seen = 0;
  for (const auto& e : differs.entries)
    if (e.tensor == "train_loss" || e.tensor == "step9_weight") {
      ++seen;
      EXPECT_EQ(e.verdict, compare::Verdict::failed) << e.tensor;
    }
  EXPECT_EQ(seen, 2);
}

// Checkpoints: the tolerance grows as sqrt(1 + k). A relative error of 1.5e-3 on a weight fails at
// step 1 (gate 5e-4 * sqrt 2 = 7.1e-4) and passes at step 10 (5e-4 * sqrt 11 = 1.66e-3).
TEST_F(Trajectory, CheckpointToleranceGrowsWithTheStep) {
  EXPECT_DOUBLE_EQ(compare::checkpoint_tolerance_factor("step99_grad_weight"), 10.0);
  EXPECT_DOUBLE_EQ(compare::checkpoint_tolerance_factor("step0_weight"), 1.0);
  EXPECT_DOUBLE_EQ(compare::checkpoint_tolerance_factor("grad_weight"), 1.0);
  TrainSetup s;
  s.steps = 11;
  s.checkpoint_every = 10;  // 0, 1, 10
  const auto exact = simulate<double>(s);
  const std::string ref = tmp / "ref", run = tmp / "run";
  write_training_sets(ref, run, s, exact, exact, [](const std::string& key, Tensor& t) {
    if (key.find("step1_weight") != std::string::npos || key.find("step10_weight") != std::string::npos)
      for (std::int64_t i = 0; i < t.numel(); i += 3) t.set(i, t.get(i) * (1 + 1.5e-3));
  });
  const Sets r = compare_sets(ref, run);
  EXPECT_EQ(r.find("step1_weight")->verdict, compare::Verdict::failed);
  EXPECT_NEAR(*r.find("step1_weight")->gates->rtol, 5e-4 * std::sqrt(2.0), 1e-12);
  EXPECT_EQ(r.find("step10_weight")->verdict, compare::Verdict::passed) << r.find("step10_weight")->message;
  EXPECT_NEAR(*r.find("step10_weight")->gates->rtol, 5e-4 * std::sqrt(11.0), 1e-12);
  // The loss curve passed: the trajectory summary still names the failing checkpoint.
  const auto& t = *r.find("train_loss")->trajectory;
  EXPECT_EQ(t.kind, "none");
  EXPECT_EQ(t.first_bad_checkpoint, "step1_weight");
  EXPECT_EQ(r.report.exit_code(), 1);
}

// A gradient checkpoint in another layout is diagnosed like the gradient: step1_grad_weight
// reported in its OHWI bytes (not converted back) is named as such.
TEST_F(Trajectory, AGradientCheckpointInAnotherLayoutIsNamed) {
  TrainSetup s;
  s.steps = 5;
  const auto exact = simulate<double>(s);
  const std::string ref = tmp / "ref", run = tmp / "run";
  write_training_sets(ref, run, s, exact, exact, [](const std::string& key, Tensor& t) {
    if (key.find("step1_grad_weight") != std::string::npos) t = permuted_bytes(t, {0, 2, 3, 1});
  });
  const Sets r = compare_sets(ref, run);
  const compare::Entry* g1 = r.find("step1_grad_weight");
  EXPECT_EQ(g1->verdict, compare::Verdict::failed);
  ASSERT_TRUE(g1->diagnosis && g1->diagnosis->named()) << (g1->diagnosis ? g1->diagnosis->summary : "");
  EXPECT_EQ(g1->diagnosis->named()->spec, "OHWI");
  EXPECT_EQ(g1->diagnosis->named()->side, "output");
  EXPECT_NE(g1->diagnosis->summary.find("run step1_grad_weight equals reference"), std::string::npos)
      << g1->diagnosis->summary;
}

// The program's own layouts count: a program that keeps its weights in OHWI (declared so) and
// applies a dW it holds in OIHW bytes to them. The runner converted the OHWI weights to canonical
// OIHW, so the run's update is the reference's read through that mix-up; the diagnosis, reading
// the update back in the declared OHWI bytes, names OIHW and says the weight is stored as OHWI.
TEST_F(Trajectory, AnUpdateAgainstTheDeclaredWeightLayoutIsNamed) {
  TrainSetup s;
  s.steps = 4;
  s.lr = 0.05;
  const auto exact = simulate<double>(s);
  auto run = exact;
  {
    // canonical[o,i,h,w] = update bytes at the OHWI offset of (o,i,h,w), those bytes being the
    // reference update in OIHW (C) order.
    const auto& w0 = exact.at("step0_weight");
    const auto& w1 = exact.at("step1_weight");
    auto& r1 = run.at("step1_weight");
    for (std::int64_t o = 0; o < kTO; ++o)
      for (std::int64_t i = 0; i < kTC; ++i)
        for (std::int64_t h = 0; h < kTKH; ++h)
          for (std::int64_t w = 0; w < kTKW; ++w) {
            const auto canon = static_cast<std::size_t>(((o * kTC + i) * kTKH + h) * kTKW + w);
            const auto ohwi = static_cast<std::size_t>(((o * kTKH + h) * kTKW + w) * kTC + i);
            r1[canon] = w0[canon] + (w1[ohwi] - w0[ohwi]);
          }
  }
  const std::string ref = tmp / "ref", dir = tmp / "run";
  write_training_sets(ref, dir, s, exact, run, {}, [](Json& doc) {
    doc["ops"]["conv2d"]["layouts"] = {{"input", "NHWC"}, {"weight", "OHWI"}, {"grad_weight", "OHWI"}};
  });
  const Sets r = compare_sets(ref, dir);
  const compare::Entry* w1 = r.find("step1_weight");
  ASSERT_NE(w1, nullptr);
  EXPECT_EQ(w1->verdict, compare::Verdict::failed);
  ASSERT_TRUE(w1->diagnosis && w1->diagnosis->named()) << (w1->diagnosis ? w1->diagnosis->summary : "");
  EXPECT_EQ(w1->diagnosis->named()->code, "update_layout");
  EXPECT_EQ(w1->diagnosis->named()->params["layout"], "OIHW");
  EXPECT_NE(w1->diagnosis->summary.find("update applied with dW in OIHW layout"), std::string::npos)
      << w1->diagnosis->summary;
  EXPECT_NE(w1->diagnosis->summary.find("stored as OHWI"), std::string::npos) << w1->diagnosis->summary;
}

// Not only conv filters: a matmul whose update reads dB transposed (a Fortran [K,N] array handed
// to a C-order update, or the reverse) is named through its update too. Hand-built: B (K=7, N=4)
// and its gradient at step 0 from the fixture's normals, step 1 = step 0 - lr * G in the
// reference, step 0 - lr * (G's [N,K] bytes read as [K,N]) in the run.
TEST_F(Trajectory, AMatmulUpdateWithDbTransposedIsNamed) {
  cases::Case c;
  c.name = "train_mm";
  c.dtype = DType::float32;
  cases::MatmulParams m;
  m.m = 5;
  m.k = 7;
  m.n = 4;
  c.ops = {cases::OpInstance{m}};
  train::TrainConfig tc;
  tc.steps = 3;
  tc.lr = 0.1;
  c.train = tc;
  const std::string ref = tmp / "ref", run = tmp / "run";
  std::map<std::string, std::vector<double>> held;  // step0_B and step0_grad_B as written
  write_reference(ref, {c}, [&](const std::string& key, Tensor& t) {
    const std::string name = key.substr(key.rfind('/') + 1);
    if (name == "step0_B" || name == "step0_grad_B") {
      for (std::int64_t i = 0; i < t.numel(); ++i) held[name].push_back(t.get(i));
    } else if (name == "step1_B") {
      for (std::int64_t i = 0; i < t.numel(); ++i)
        t.set(i, held["step0_B"][static_cast<std::size_t>(i)] - 0.1 * held["step0_grad_B"][static_cast<std::size_t>(i)]);
    }
  });
  RunSpec spec;
  spec.mutate = [&](const std::string& key, Tensor& t) {
    if (key.substr(key.rfind('/') + 1) != "step1_B") return;
    Tensor g(DType::float64, {7, 4});
    for (std::int64_t i = 0; i < 28; ++i) g.set(i, held["step0_grad_B"][static_cast<std::size_t>(i)]);
    const Tensor gt = permuted_bytes(g, {1, 0});  // its [N,K] bytes, labelled [K,N]
    for (std::int64_t i = 0; i < 28; ++i) t.set(i, held["step0_B"][static_cast<std::size_t>(i)] - 0.1 * gt.get(i));
  };
  write_run(ref, run, spec);
  const Sets r = compare_sets(ref, run);
  const compare::Entry* b1 = r.find("step1_B");
  ASSERT_NE(b1, nullptr);
  EXPECT_EQ(b1->verdict, compare::Verdict::failed);
  ASSERT_TRUE(b1->diagnosis && b1->diagnosis->named()) << (b1->diagnosis ? b1->diagnosis->summary : "");
  EXPECT_EQ(b1->diagnosis->named()->code, "update_layout");
  EXPECT_EQ(b1->diagnosis->named()->params["reading"], "transposed");
  EXPECT_NE(b1->diagnosis->summary.find("update applied with dB in NK layout"), std::string::npos)
      << b1->diagnosis->summary;
}

// A policy may select the new roles and the training tensors by name; a misspelt one is refused.
TEST(TrajectoryPolicy, RolesAndTensorNamesOfTraining) {
  auto p = compare::Policy::builtin();
  const auto curve = p.resolve({"float32", ops::Op::conv2d, ops::Role::loss_curve, "train_loss"});
  ASSERT_TRUE(curve.loss_rel);
  EXPECT_DOUBLE_EQ(*curve.loss_rel, 1e-6);
  EXPECT_FALSE(curve.rtol);
  // Checkpoints: the trajectory's error bound (a set without its scales: the fixed rtol, applied
  // by compare).
  const auto ck = p.resolve({"float32", ops::Op::conv2d, ops::Role::checkpoint, "step3_weight"});
  ASSERT_TRUE(ck.bound);
  EXPECT_DOUBLE_EQ(*ck.bound, 8);
  EXPECT_FALSE(ck.rtol);
  // Mixed-precision trajectories have their own r0 (docs/training.md, "Mixed precision").
  EXPECT_DOUBLE_EQ(*p.resolve({"bfloat16", ops::Op::conv2d, ops::Role::loss_curve, "train_loss"}).loss_rel, 1e-3);
  EXPECT_DOUBLE_EQ(*p.resolve({"float16", ops::Op::conv2d, ops::Role::loss_curve, "train_loss"}).loss_rel, 2e-4);
  EXPECT_DOUBLE_EQ(*p.resolve({"bfloat16", ops::Op::conv2d, ops::Role::checkpoint, "step1_weight"}).min_pcc, 0.999);
  EXPECT_TRUE(p.add_gate("float32.checkpoint.rtol=1e-3"));
  EXPECT_TRUE(p.add_gate("float32.step1_grad_weight.rtol=1e-2"));  // as specific, later: wins
  EXPECT_TRUE(p.add_gate("train_loss.loss_rel=2e-6"));
  EXPECT_FALSE(p.add_gate("step1_grad_wieght.rtol=1e-2"));
  EXPECT_TRUE(p.add_json(Json::parse(R"({"rules": [{"role": "checkpoint", "tensor": "step10_weight", "rtol": 1e-3}]})"), "t"));
  EXPECT_FALSE(p.add_json(Json::parse(R"({"rules": [{"tensor": "step10_wieght", "rtol": 1e-3}]})"), "t"));
  EXPECT_DOUBLE_EQ(*p.resolve({"float32", ops::Op::conv2d, ops::Role::checkpoint, "step1_grad_weight"}).rtol, 1e-2);
  EXPECT_DOUBLE_EQ(*p.resolve({"float32", ops::Op::conv2d, ops::Role::loss_curve, "train_loss"}).loss_rel, 2e-6);
}

}  // namespace
