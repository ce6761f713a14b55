// The optimizer state a training loop gets wrong, named from the run's own checkpoints: momentum
// missing (momentum 0 where the case has 0.9) and gradients never zeroed between steps (a missing
// zero_grad), each written out by the fixture's own float32 loop (trajectory_fixture.hpp), none of
// them read as a layout mistake.
#include "trajectory_compare_fixture.hpp"

namespace {

const compare::Entry& entry(const Sets& r, const std::string& tensor) {
  const compare::Entry* e = r.find(tensor);
  EXPECT_NE(e, nullptr) << tensor;
  static const compare::Entry none;
  return e ? *e : none;
}

std::string summary_of(const compare::Entry& e) { return e.diagnosis ? e.diagnosis->summary : std::string("(none)"); }

// Six steps, checkpoints 0, 1, 2 and 5.
TrainSetup six_steps() {
  TrainSetup s;
  s.steps = 6;
  s.checkpoint_every = 0;
  return s;
}

// Each of `tensors` failed of `tensors`, with a diagnosis naming `code`.
void expect_named(const Sets& r, std::initializer_list<const char*> tensors, const std::string& code) {
  for (const char* t : tensors) {
    SCOPED_TRACE(t);
    const compare::Entry& e = entry(r, t);
    EXPECT_EQ(e.verdict, compare::Verdict::failed);
    ASSERT_TRUE(e.diagnosis && e.diagnosis->named()) << summary_of(e);
    EXPECT_EQ(e.diagnosis->named()->code, code) << e.diagnosis->summary;
  }
}

void expect_passed(const Sets& r, std::initializer_list<const char*> tensors) {
  for (const char* t : tensors) EXPECT_EQ(entry(r, t).verdict, compare::Verdict::passed) << t << ": " << entry(r, t).message;
}

}  // namespace

// SGD with momentum 0 on a case with 0.9: the first update is the same (torch.optim.SGD starts the
// buffer as the gradient), the second is lr·(g1 + wd·w1) instead of lr·(0.9·b1 + g1 + wd·w1).
TEST_F(Trajectory, MomentumMissingIsNamedAtStep2) {
  const TrainSetup s = six_steps();
  TrainSetup plain = s;
  plain.momentum = 0;
  const std::string ref = tmp / "ref", run = tmp / "run";
  write_training_sets(ref, run, s, simulate<double>(s), simulate<float>(plain));
  const Sets r = compare_sets(ref, run);
  expect_passed(r, {"step0_weight", "step1_weight", "step1_bias", "step1_grad_weight"});
  expect_named(r, {"step2_weight", "step2_bias"}, "optimizer_settings");
  for (const char* t : {"step2_weight", "step2_bias"}) {
    const compare::Entry& e = entry(r, t);
    if (!e.diagnosis || !e.diagnosis->named()) continue;
    EXPECT_EQ(e.diagnosis->named()->params["variant"], "momentum_missing");
    EXPECT_NE(e.diagnosis->summary.find("momentum missing"), std::string::npos) << e.diagnosis->summary;
    EXPECT_NE(e.diagnosis->summary.find("momentum 0 instead of 0.9"), std::string::npos) << e.diagnosis->summary;
  }
  const compare::Entry& curve = entry(r, "train_loss");
  ASSERT_TRUE(curve.trajectory);
  EXPECT_EQ(curve.trajectory->first_bad_checkpoint_step, 2);
  // The parameter, whose own mistake is named, leads: not step2_grad_*, computed from it.
  EXPECT_EQ(curve.trajectory->first_bad_checkpoint.rfind("step2_grad_", 0), std::string::npos)
      << curve.trajectory->first_bad_checkpoint;
  EXPECT_EQ(curve.trajectory->checkpoint_diagnosis_code, "optimizer_settings");
}

// Gradients never zeroed, as PyTorch without optimizer.zero_grad(): step 1's gradient buffer holds
// g0 + g1 (written out so), the first update is still right (it applied g0 alone).
TEST_F(Trajectory, GradientsAccumulatedAcrossStepsAreNamedAtStep1) {
  const TrainSetup s = six_steps();
  const std::string ref = tmp / "ref", run = tmp / "run";
  write_training_sets(ref, run, s, simulate<double>(s), simulate<float>(s, {}, GradBuffers::accumulated));
  const Sets r = compare_sets(ref, run);
  expect_passed(r, {"step0_grad_weight", "step1_weight", "step1_bias"});
  expect_named(r, {"step1_grad_weight", "step1_grad_bias"}, "gradients_accumulated");
  for (const char* t : {"step1_grad_weight", "step1_grad_bias"}) {
    const compare::Entry& e = entry(r, t);
    if (!e.diagnosis) continue;
    EXPECT_NE(e.diagnosis->summary.find("zero_grad"), std::string::npos) << e.diagnosis->summary;
    EXPECT_EQ(e.diagnosis->summary.find("swapped"), std::string::npos) << e.diagnosis->summary;
  }
  const compare::Entry& curve = entry(r, "train_loss");
  ASSERT_TRUE(curve.trajectory);
  EXPECT_EQ(curve.trajectory->first_bad_checkpoint_step, 1);
  EXPECT_EQ(curve.trajectory->checkpoint_diagnosis_code, "gradients_accumulated");
  // Step 2's update (on the accumulated gradients the run wrote) is consistent with its own
  // checkpoints: its weights differ by consequence, not by a mistake of their own.
  const compare::Entry& w2 = entry(r, "step2_weight");
  EXPECT_EQ(w2.verdict, compare::Verdict::failed);
  ASSERT_TRUE(w2.diagnosis);
  EXPECT_NE(w2.diagnosis->summary.find("follows from"), std::string::npos) << w2.diagnosis->summary;
}

// The same loop writing each step's own gradient while the update applies the sum: step 1 is right
// everywhere, and step 2 is the case's SGD step on step1_grad + step0_grad, named from the run's
// own checkpoints.
TEST_F(Trajectory, AnUpdateOnTheSumOfTheGradientsIsNamedAtStep2) {
  const TrainSetup s = six_steps();
  const std::string ref = tmp / "ref", run = tmp / "run";
  write_training_sets(ref, run, s, simulate<double>(s),
                      simulate<float>(s, {}, GradBuffers::accumulated_update_only));
  const Sets r = compare_sets(ref, run);
  expect_passed(r, {"step1_weight", "step1_grad_weight", "step1_grad_bias"});
  expect_named(r, {"step2_weight", "step2_bias"}, "gradients_accumulated");
  for (const char* t : {"step2_weight", "step2_bias"}) {
    const compare::Entry& e = entry(r, t);
    if (!e.diagnosis) continue;
    EXPECT_NE(e.diagnosis->summary.find("step1_grad_" + std::string(t).substr(6) + " + step0_grad_"), std::string::npos)
        << e.diagnosis->summary;
  }
}

// A correct float32 loop: nothing of the above is named, every checkpoint passes.
TEST_F(Trajectory, ACorrectLoopNamesNoOptimizerState) {
  const TrainSetup s = six_steps();
  const std::string ref = tmp / "ref", run = tmp / "run";
  write_training_sets(ref, run, s, simulate<double>(s), simulate<float>(s));
  const Sets r = compare_sets(ref, run);
  for (const auto& e : r.report.entries) {
    EXPECT_EQ(e.verdict, compare::Verdict::passed) << e.tensor << ": " << e.message;
    EXPECT_FALSE(e.diagnosis.has_value()) << e.tensor;
  }
}
