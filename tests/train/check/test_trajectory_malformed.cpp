// Curves that must fail loudly: too short, NaN, wrong shape, no gate, missing, no checkpoints.
#include <gtest/gtest.h>

#include "trajectory_compare_fixture.hpp"

namespace {

TEST_F(Trajectory, ACurveShorterThanStepsFailsLoudly) {
  TrainSetup s;
  s.steps = 30;
  s.checkpoint_every = 10;
  const auto exact = simulate<double>(s);
  const std::string ref = tmp / "ref", run = tmp / "run";
  // The run stopped after 17 steps (and its 17 losses are exactly right).
  write_training_sets(ref, run, s, exact, exact, [](const std::string& key, Tensor& t) {
    if (key.size() < 10 || key.substr(key.size() - 10) != "train_loss") return;
    Tensor shorter(t.dtype(), {17});
    for (std::int64_t i = 0; i < 17; ++i) shorter.set(i, t.get(i));
    t = std::move(shorter);
  });
  const Sets r = compare_sets(ref, run);
  const compare::Entry* curve = r.find("train_loss");
  ASSERT_NE(curve, nullptr);
  EXPECT_EQ(curve->verdict, compare::Verdict::failed);
  EXPECT_NE(curve->message.find("has 17 values but the case trains 30 steps"), std::string::npos) << curve->message;
  EXPECT_NE(curve->message.find("too short"), std::string::npos);
  ASSERT_TRUE(curve->trajectory);
  EXPECT_EQ(curve->trajectory->kind, "mistake");
  EXPECT_EQ(r.report.exit_code(), 1);
  bool length_check = false;
  for (const auto& c : curve->checks) length_check |= c.name == "loss_curve_length_mismatch" && !c.passed;
  EXPECT_TRUE(length_check);
}

TEST_F(Trajectory, ACurveWithNaNOrTheWrongShapeFails) {
  TrainSetup s;
  s.steps = 20;
  s.checkpoint_every = 0;
  const auto exact = simulate<double>(s);
  {
    const std::string ref = tmp / "ref_nan", run = tmp / "run_nan";
    write_training_sets(ref, run, s, exact, exact, [](const std::string& key, Tensor& t) {
      if (key.find("train_loss") != std::string::npos) t.set(13, std::nan(""));
    });
    const Sets r = compare_sets(ref, run);
    const compare::Entry* curve = r.find("train_loss");
    EXPECT_EQ(curve->verdict, compare::Verdict::failed);
    EXPECT_NE(curve->message.find("is nan at step 13"), std::string::npos) << curve->message;
    EXPECT_EQ(curve->trajectory->first_bad_step, 13);
    EXPECT_EQ(curve->trajectory->kind, "mistake");
    ASSERT_TRUE(curve->loss);  // the tables' cells: not a finite number that hides the NaN
    EXPECT_TRUE(std::isnan(curve->loss->abs_diff));
  }
  {
    const std::string ref = tmp / "ref_shape", run = tmp / "run_shape";
    write_training_sets(ref, run, s, exact, exact, [](const std::string& key, Tensor& t) {
      if (key.find("train_loss") == std::string::npos) return;
      Tensor two_d(t.dtype(), {20, 1});
      for (std::int64_t i = 0; i < 20; ++i) two_d.set(i, t.get(i));
      t = std::move(two_d);
    });
    const Sets r = compare_sets(ref, run);
    const compare::Entry* curve = r.find("train_loss");
    EXPECT_EQ(curve->verdict, compare::Verdict::failed);
    EXPECT_NE(curve->message.find("has shape [20, 1], expected [20]"), std::string::npos) << curve->message;
  }
}

TEST_F(Trajectory, ACurveWithoutAGateFails) {
  TrainSetup s;
  s.steps = 10;
  const auto exact = simulate<double>(s);
  const std::string ref = tmp / "ref", run = tmp / "run";
  write_training_sets(ref, run, s, exact, exact);
  const Sets r = compare_sets(ref, run, false, {"float32.loss_curve.loss_rel=none"});
  const compare::Entry* curve = r.find("train_loss");
  EXPECT_EQ(curve->verdict, compare::Verdict::failed);
  EXPECT_NE(curve->message.find("no loss_rel for role loss_curve"), std::string::npos) << curve->message;
}

// --require-all fails a run that did not return the trajectory of a training case; without it the
// report warns that only step 0 was checked.
TEST_F(Trajectory, RequireAllFailsARunWithoutTheTrajectory) {
  TrainSetup s;
  s.steps = 10;
  const auto exact = simulate<double>(s);
  const std::string ref = tmp / "ref", run = tmp / "run";
  write_training_sets(ref, run, s, exact, exact, {}, [](Json& doc) {
    Json kept = Json::array();
    for (const auto& t : doc["ops"]["conv2d"]["produced"]) {
      const std::string n = t.get<std::string>();
      if (n != "train_loss" && n.rfind("step", 0) != 0) kept.push_back(n);
    }
    doc["ops"]["conv2d"]["produced"] = kept;
  });
  const Sets plain = compare_sets(ref, run);
  EXPECT_EQ(plain.find("train_loss")->verdict, compare::Verdict::not_run);
  bool warned = false;
  for (const auto& w : plain.report.warnings) warned |= w.find("returned no trajectory") != std::string::npos;
  EXPECT_TRUE(warned);
  const Sets strict = compare_sets(ref, run, true);
  EXPECT_EQ(strict.report.exit_code(), 1);
}

// The loss curve without the checkpoints: the report says the parameters were not checked.
TEST_F(Trajectory, ACurveWithoutCheckpointsIsWarnedAbout) {
  TrainSetup s;
  s.steps = 10;
  const auto exact = simulate<double>(s);
  const std::string ref = tmp / "ref", run = tmp / "run";
  write_training_sets(ref, run, s, exact, exact, {}, [](Json& doc) {
    Json kept = Json::array();
    for (const auto& t : doc["ops"]["conv2d"]["produced"])
      if (t.get<std::string>().rfind("step", 0) != 0) kept.push_back(t);
    doc["ops"]["conv2d"]["produced"] = kept;
  });
  const Sets plain = compare_sets(ref, run);
  EXPECT_EQ(plain.find("train_loss")->verdict, compare::Verdict::passed);
  bool warned = false;
  for (const auto& w : plain.report.warnings) warned |= w.find("16 of 16 checkpoints are not run") != std::string::npos;
  EXPECT_TRUE(warned);
  EXPECT_EQ(compare_sets(ref, run, true).report.exit_code(), 1);
}

// policies/bitwise.json (determinism): an identical trajectory passes, a float32 one does not.
}  // namespace
