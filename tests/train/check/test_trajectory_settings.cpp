// SGD settings read from the run's own first two updates: what each step can tell and what it
// cannot. A Nesterov first update is lr·(1 + momentum)·g, so a learning rate and a momentum with
// the same product fit step 1 equally (both named; step 2, the first update that reads the
// momentum buffer, decides); a momentum other than the case's shows at step 2 and is named with
// its value. The expected values are read by hand from the wrong optimizer's float64 trajectory.
// The reports' footer names what the folded failures follow from.
#include <sstream>

#include "trajectory_compare_fixture.hpp"
#include "validate/report/reporter.hpp"

namespace {

// The element of `v` largest in magnitude: the best-conditioned one to read a coefficient from.
std::size_t largest(const std::vector<double>& v) {
  std::size_t at = 0;
  for (std::size_t i = 1; i < v.size(); ++i)
    if (std::fabs(v[i]) > std::fabs(v[at])) at = i;
  return at;
}

// The JSON report's entry of `tensor`.
nlohmann::json json_entry(const compare::Report& r, const std::string& tensor) {
  const nlohmann::json j = report::render_json(r);
  for (const auto& e : j.at("entries"))
    if (e.at("tensor") == tensor) return e;
  ADD_FAILURE() << "no entry " << tensor;
  return nlohmann::json::object();
}

// Six steps (checkpoints 0, 1, 2, 5), Nesterov momentum 0.5 at lr 0.05, weight decay 1e-4.
TrainSetup nesterov_case(std::int64_t steps = 6) {
  TrainSetup s;
  s.steps = steps;
  s.checkpoint_every = 0;
  s.momentum = 0.5;
  s.nesterov = true;
  return s;
}

// a1 of w0 − w1 = a1·(g0 + wd·w0), read from one element of a float64 trajectory.
double first_factor(const TrajectoryValues& v, double wd) {
  const auto& w0 = v.at("step0_weight");
  const auto& w1 = v.at("step1_weight");
  const auto& g0 = v.at("step0_grad_weight");
  const std::size_t i = largest(g0);
  return (w0[i] - w1[i]) / (g0[i] + wd * w0[i]);
}

}  // namespace

// The run trains with momentum 0.9 where the case has Nesterov 0.5: step 1 alone shows only
// lr·(1 + momentum), which a learning rate of a1 / 1.5 fits as well as the momentum 0.9. With the
// run's step 2 the diagnosis names the momentum and says what decided it; step2_weight names it too.
TEST_F(Trajectory, ANesterovFirstStepNamesLearningRateAndMomentumAndStep2TellsThemApart) {
  const TrainSetup s = nesterov_case();
  TrainSetup planted = s;
  planted.momentum = 0.9;
  const double a1 = first_factor(simulate<double>(planted), s.weight_decay);
  ASSERT_NEAR(a1, s.lr * 1.9, 1e-12);  // the wrong optimizer's own first factor
  const double lr_candidate = a1 / (1 + s.momentum), momentum_candidate = a1 / s.lr - 1;
  const std::string ref = tmp / "ref", run = tmp / "run";
  write_training_sets(ref, run, s, simulate<double>(s), simulate<float>(planted));
  const Sets r = compare_sets(ref, run);
  for (const char* param : {"weight", "bias"}) {
    SCOPED_TRACE(param);
    const nlohmann::json e1 = json_entry(r.report, std::string("step1_") + param);
    EXPECT_EQ(e1.at("verdict"), "failed");
    const nlohmann::json& d1 = e1.at("diagnosis");
    ASSERT_EQ(d1.at("code"), "optimizer_settings") << d1.dump();
    EXPECT_EQ(d1.at("params").at("candidates"), nlohmann::json({"learning_rate", "momentum"})) << d1.dump();
    EXPECT_EQ(d1.at("params").at("told_apart_by"), std::string("step2_") + param);
    EXPECT_EQ(d1.at("params").at("setting"), "momentum");
    EXPECT_NEAR(d1.at("params").at("momentum_run").get<double>(), momentum_candidate, 1e-5);
    EXPECT_NEAR(d1.at("params").at("step1_factor").get<double>(), a1, 1e-6 * a1);
    const std::string summary = d1.at("summary");
    EXPECT_NE(summary.find(fmt::format("learning rate {:.6g} instead of 0.05", lr_candidate)), std::string::npos)
        << summary;
    EXPECT_NE(summary.find("momentum 0.9 instead of 0.5 fits it on every element"), std::string::npos) << summary;
    const nlohmann::json e2 = json_entry(r.report, std::string("step2_") + param);
    const nlohmann::json& d2 = e2.at("diagnosis");
    ASSERT_EQ(d2.at("code"), "optimizer_settings") << d2.dump();
    EXPECT_EQ(d2.at("params").at("variant"), "second_update_settings");
    EXPECT_NEAR(d2.at("params").at("momentum_run").get<double>(), 0.9, 1e-4);
    EXPECT_NEAR(d2.at("params").at("lr_run").get<double>(), s.lr, 1e-4 * s.lr);
  }
}

// The same run against a case of two steps (checkpoints 0 and 1): nothing tells the two apart, so
// both are named, neither as the one, and the sentence says what would decide.
TEST_F(Trajectory, WithoutAStep2CheckpointBothFirstStepReadingsStayNamed) {
  const TrainSetup s = nesterov_case(2);
  TrainSetup planted = s;
  planted.momentum = 0.9;
  const double a1 = first_factor(simulate<double>(planted), s.weight_decay);
  const double lr_candidate = a1 / (1 + s.momentum), momentum_candidate = a1 / s.lr - 1;
  const std::string ref = tmp / "ref", run = tmp / "run";
  write_training_sets(ref, run, s, simulate<double>(s), simulate<float>(planted));
  const Sets r = compare_sets(ref, run);
  const compare::Entry* w1 = r.find("step1_weight");
  ASSERT_NE(w1, nullptr);
  ASSERT_TRUE(w1->diagnosis && w1->diagnosis->named()) << w1->message;
  EXPECT_TRUE(w1->diagnosis->ambiguous);
  ASSERT_EQ(w1->diagnosis->matches.size(), 2u) << w1->diagnosis->summary;
  const compare::Hypothesis& lr = w1->diagnosis->matches[0];
  const compare::Hypothesis& mu = w1->diagnosis->matches[1];
  EXPECT_EQ(lr.params["setting"], "learning_rate");
  EXPECT_NEAR(lr.params["lr_run"].get<double>(), lr_candidate, 1e-6 * lr_candidate);
  EXPECT_EQ(mu.params["setting"], "momentum");
  EXPECT_NEAR(mu.params["momentum_run"].get<double>(), momentum_candidate, 1e-5);
  EXPECT_NEAR(mu.params["lr_run"].get<double>(), s.lr, 1e-12);
  EXPECT_TRUE(lr.params["told_apart_by"].is_null());
  const std::string& summary = w1->diagnosis->summary;
  EXPECT_NE(summary.find("learning rate 0.0633333 instead of 0.05 or momentum 0.9 instead of 0.5 each explain equally"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("a step-2 checkpoint would tell them apart"), std::string::npos) << summary;
}

// Momentum 0.5 where the case has 0.9 (dampening 0.1, weight decay 1e-3, no Nesterov): the first
// update is the case's (the buffer starts as the gradient), the second is named with the momentum
// it used, and with the learning rate and dampening it did not change.
TEST_F(Trajectory, AWrongMomentumIsNamedWithItsValueAtStep2) {
  TrainSetup s;
  s.steps = 6;
  s.checkpoint_every = 0;
  s.dampening = 0.1;
  s.weight_decay = 1e-3;
  TrainSetup planted = s;
  planted.momentum = 0.5;
  // The momentum read by hand from the wrong optimizer in float64: w1 − w2 = lr(1 − d)·g1' + lr·mu·g0'.
  const TrajectoryValues exact_planted = simulate<double>(planted);
  const auto &w0 = exact_planted.at("step0_weight"), &w1 = exact_planted.at("step1_weight"),
             &w2 = exact_planted.at("step2_weight"), &g0 = exact_planted.at("step0_grad_weight"),
             &g1 = exact_planted.at("step1_grad_weight");
  const std::size_t i = largest(g0);
  const double mu = ((w1[i] - w2[i]) - s.lr * (1 - s.dampening) * (g1[i] + s.weight_decay * w1[i])) /
                    (s.lr * (g0[i] + s.weight_decay * w0[i]));
  ASSERT_NEAR(mu, 0.5, 1e-9);
  const std::string ref = tmp / "ref", run = tmp / "run";
  write_training_sets(ref, run, s, simulate<double>(s), simulate<float>(planted));
  const Sets r = compare_sets(ref, run);
  EXPECT_EQ(r.find("step1_weight")->verdict, compare::Verdict::passed) << r.find("step1_weight")->message;
  for (const char* t : {"step2_weight", "step2_bias"}) {
    SCOPED_TRACE(t);
    const nlohmann::json d = json_entry(r.report, t).at("diagnosis");
    ASSERT_EQ(d.at("code"), "optimizer_settings") << d.dump();
    EXPECT_FALSE(d.at("ambiguous").get<bool>());
    EXPECT_EQ(d.at("params").at("variant"), "second_update_settings");
    EXPECT_NEAR(d.at("params").at("momentum_run").get<double>(), mu, 1e-4);
    EXPECT_NEAR(d.at("params").at("lr_run").get<double>(), s.lr, 1e-4 * s.lr);
    EXPECT_NEAR(d.at("params").at("dampening_run").get<double>(), s.dampening, 1e-3);
    const std::string summary = d.at("summary");
    EXPECT_NE(summary.find("momentum 0.5 instead of 0.9"), std::string::npos) << summary;
    EXPECT_EQ(summary.find("learning rate"), std::string::npos) << summary;
    EXPECT_EQ(summary.find("none of these"), std::string::npos) << summary;
  }
  const compare::Entry* curve = r.find("train_loss");
  ASSERT_TRUE(curve && curve->trajectory);
  EXPECT_EQ(curve->trajectory->first_bad_checkpoint_step, 2);
  EXPECT_EQ(curve->trajectory->checkpoint_diagnosis_code, "optimizer_settings");
}

// The learning rate halved from the second update on (a schedule the case does not have), momentum
// 0.9, no dampening: step 2's coefficients are the case's times 0.5, which momentum 0.45 with
// dampening 0.5 at the case's rate gives too. Both readings are written; neither is left out.
TEST_F(Trajectory, ALearningRateChangedAtStep2IsNamedBesideTheMomentumReadingItEquals) {
  TrainSetup s;
  s.steps = 6;
  s.checkpoint_every = 0;
  TrainSetup planted = s;
  planted.later_lr = s.lr / 2;
  // By hand: alpha = later_lr = lr (1 − d'), beta = later_lr·0.9 = lr·mu'.
  const double mu = planted.later_lr * s.momentum / s.lr, dampening = 1 - planted.later_lr / s.lr;
  const std::string ref = tmp / "ref", run = tmp / "run";
  write_training_sets(ref, run, s, simulate<double>(s), simulate<float>(planted));
  const Sets r = compare_sets(ref, run);
  EXPECT_EQ(r.find("step1_weight")->verdict, compare::Verdict::passed) << r.find("step1_weight")->message;
  const nlohmann::json d = json_entry(r.report, "step2_weight").at("diagnosis");
  ASSERT_EQ(d.at("code"), "optimizer_settings") << d.dump();
  EXPECT_NEAR(d.at("params").at("lr_from_step2").get<double>(), planted.later_lr, 1e-4 * s.lr) << d.dump();
  EXPECT_NEAR(d.at("params").at("momentum_run").get<double>(), mu, 1e-4);
  EXPECT_NEAR(d.at("params").at("dampening_run").get<double>(), dampening, 1e-4);
  const std::string summary = d.at("summary");
  EXPECT_NE(summary.find("momentum 0.45 instead of 0.9; dampening 0.5 instead of 0"), std::string::npos) << summary;
  EXPECT_NE(summary.find("learning rate 0.025 from step 2 on"), std::string::npos) << summary;
}

// The footer of the folded failures says what they follow from: "the mistakes named above" only
// when their first bad checkpoint names one. dW applied in its OHWI bytes from step 1 on (the update
// that makes step2_weight, after a momentum step: no layout or setting explains it) names nothing.
TEST_F(Trajectory, TheFoldedFailuresFollowFromWhatWasNamedInEveryReport) {
  TrainSetup s;
  s.steps = 6;
  s.checkpoint_every = 0;
  auto render = [](const compare::Report& rep) {
    std::ostringstream terminal;
    report::render_terminal(terminal, rep, report::TerminalOptions{});
    return std::make_pair(terminal.str(), report::render_markdown(rep));
  };
  const std::string ref = tmp / "ref", unnamed = tmp / "unnamed", ref_named = tmp / "ref_named", named = tmp / "named";
  write_training_sets(ref, unnamed, s, simulate<double>(s), simulate<float>(s, kLayouts[0].second, GradBuffers::zeroed, 1));
  const Sets u = compare_sets(ref, unnamed);
  const compare::Entry* w2 = u.find("step2_weight");
  ASSERT_NE(w2, nullptr);
  EXPECT_EQ(w2->verdict, compare::Verdict::failed);
  ASSERT_TRUE(w2->diagnosis);
  ASSERT_EQ(w2->diagnosis->named(), nullptr) << w2->diagnosis->summary;
  std::size_t folded = 0;
  for (const auto& e : u.report.entries) folded += e.diagnosis && !e.diagnosis->follows_from.empty() ? 1 : 0;
  ASSERT_GT(folded, 0u);
  const auto [terminal, markdown] = render(u.report);
  for (const std::string& text : {terminal, markdown}) {
    EXPECT_EQ(text.find("named above"), std::string::npos) << text;
    EXPECT_NE(text.find(fmt::format("{} failure{} that follow{} from an earlier failure above that no mistake was named "
                                    "for",
                                    folded, folded == 1 ? "" : "s", folded == 1 ? "s" : "")),
              std::string::npos)
        << text;
  }
  EXPECT_EQ(terminal.find("what went wrong"), std::string::npos) << terminal;
  // Momentum 0.5 at step 2: named, and the failures after it follow from that.
  TrainSetup planted = s;
  planted.momentum = 0.5;
  write_training_sets(ref_named, named, s, simulate<double>(s), simulate<float>(planted));
  const auto [terminal_named, markdown_named] = render(compare_sets(ref_named, named).report);
  for (const std::string& text : {terminal_named, markdown_named}) {
    EXPECT_NE(text.find("that follow from the mistakes named above"), std::string::npos) << text;
    EXPECT_EQ(text.find("no mistake was named"), std::string::npos) << text;
  }
}
