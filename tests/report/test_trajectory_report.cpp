// Every report format shows a training trajectory's verdict: the first bad step,
// drift or mistake, the sentence, and the first bad checkpoint's diagnosis; the HTML page plots
// both loss curves and their relative difference per step with the gate drawn. The comparison is
// real: tests/train/check/trajectory_fixture.hpp's planted wrong-layout update (dW in OHWI
// bytes) and a clean float32 run, against the float64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <sstream>

#include "../../harness/report/src/svg.hpp"
#include "../common/temp_dir.hpp"
#include "../train/check/trajectory_fixture.hpp"
#include "validate/compare/compare.hpp"
#include "validate/report/reporter.hpp"

using namespace validate;
using namespace validate::testing;
namespace svg = validate::report::svg;

namespace {

std::size_t count_in(const std::string& s, const std::string& sub) {
  std::size_t n = 0;
  for (auto p = s.find(sub); p != std::string::npos; p = s.find(sub, p + 1)) ++n;
  return n;
}

class TrajectoryReports : public ::testing::Test {
 protected:
  TempDir tmp{"trajectory_reports"};
  compare::Report planted, clean;
  TrainSetup s;
  void SetUp() override {
    s.steps = 12;
    s.checkpoint_every = 5;
    s.lr = 0.05;
    const auto exact = simulate<double>(s);
    planted = run(exact, simulate<float>(s, {0, 2, 3, 1}), "p");
    clean = run(exact, simulate<float>(s), "c");
  }
  compare::Report run(const TrajectoryValues& exact, const TrajectoryValues& values, const std::string& tag) {
    const std::string ref = tmp / ("ref" + tag), dir = tmp / ("run" + tag);
    write_training_sets(ref, dir, s, exact, values);
    compare::CompareOptions o;
    o.ref_dir = ref;
    o.run_dir = dir;
    o.threads = 1;
    auto r = compare::compare_sets(o);
    EXPECT_TRUE(r) << r.message();
    return std::move(*r);
  }
};

TEST_F(TrajectoryReports, TerminalShowsTheVerdictAndTheNamedUpdate) {
  std::ostringstream o;
  report::render_terminal(o, planted, {});
  const std::string t = o.str();
  EXPECT_NE(t.find("training trajectories"), std::string::npos) << t;
  EXPECT_NE(t.find("float32/train_conv/conv2d  FAILED at step 1 (mistake): the loss curves part at step 1"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("first bad checkpoint step1_weight (step 1): update applied with dW in OHWI (cuDNN's KRSC) layout"),
            std::string::npos)
      << t;
  std::ostringstream c;
  report::render_terminal(c, clean, {});
  EXPECT_NE(c.str().find("passed: 12 steps within the gate 1e-06 * sqrt(1 + step)"), std::string::npos) << c.str();
  EXPECT_NE(c.str().find("checkpoints: 0 of 24 failed"), std::string::npos) << c.str();
}

// A trajectory whose loss stays within its gate while a checkpoint fails is not "passed".
TEST_F(TrajectoryReports, ACheckpointFailureFailsTheTrajectoryLine) {
  const std::string ref = tmp / "ref_ck", dir = tmp / "run_ck";
  const auto exact = simulate<double>(s);
  write_training_sets(ref, dir, s, exact, exact, [](const std::string& key, Tensor& t) {
    if (key.find("step5_grad_bias") != std::string::npos) t.set(2, t.get(2) * 1.01);
  });
  compare::CompareOptions o;
  o.ref_dir = ref;
  o.run_dir = dir;
  o.threads = 1;
  auto r = compare::compare_sets(o);
  ASSERT_TRUE(r) << r.message();
  std::ostringstream out;
  report::render_terminal(out, *r, {});
  EXPECT_NE(out.str().find("FAILED at checkpoint step 5: the loss curve stays within its gate at all 12 steps"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("but 1 of 24 checkpoints failed"), std::string::npos);
  EXPECT_NE(report::render_html(*r).find("<article class=\"trajectory failed\""), std::string::npos);
  EXPECT_EQ(report::render_json(*r)["trajectories"][0]["failed"], true);
}

TEST_F(TrajectoryReports, JsonCarriesTheCurvesAndTheVerdict) {
  const auto j = report::render_json(planted);
  ASSERT_EQ(j["trajectories"].size(), 1u);
  const auto& v = j["trajectories"][0];
  EXPECT_EQ(v["id"], "float32/train_conv/conv2d");
  EXPECT_EQ(v["first_bad_step"], 1);
  EXPECT_EQ(v["kind"], "mistake");
  EXPECT_EQ(v["failed"], true);
  EXPECT_EQ(v["first_bad_checkpoint"], "step1_weight");
  EXPECT_EQ(v["checkpoint_diagnosis_code"], "update_layout");
  const nlohmann::json* entry = nullptr;
  for (const auto& e : j["entries"])
    if (e["tensor"] == "train_loss") entry = &e;
  ASSERT_NE(entry, nullptr);
  const auto& t = (*entry)["trajectory"];
  EXPECT_EQ(t["steps"], 12);
  EXPECT_DOUBLE_EQ(t["r0"].get<double>(), 1e-6);
  ASSERT_EQ(t["ref"].size(), 12u);
  ASSERT_EQ(t["run"].size(), 12u);
  ASSERT_EQ(t["gate_per_step"].size(), 12u);
  for (int i = 0; i < 12; ++i) {
    EXPECT_NEAR(t["gate_per_step"][i].get<double>(), 1e-6 * std::sqrt(1.0 + i), 1e-18);
    const double ref = t["ref"][i], run = t["run"][i];
    EXPECT_NEAR(t["rel_error"][i].get<double>(), std::fabs(run - ref) / std::fabs(ref), 1e-15);
  }
  EXPECT_EQ(report::render_json(clean)["trajectories"][0]["first_bad_step"], -1);
}

TEST_F(TrajectoryReports, MarkdownAndJunitShowTheVerdict) {
  const std::string md = report::render_markdown(planted);
  EXPECT_NE(md.find("#### Training trajectories"), std::string::npos);
  EXPECT_NE(md.find("FAILED at step 1 (mistake)"), std::string::npos) << md;
  EXPECT_NE(md.find("update applied with dW in OHWI"), std::string::npos) << md;
  const std::string ju = report::render_junit(planted);
  EXPECT_NE(ju.find("trajectory: FAILED at step 1 (mistake)"), std::string::npos) << ju;
  // A passing trajectory says how close it came, in the test's output.
  const std::string jc = report::render_junit(clean);
  EXPECT_NE(jc.find("<system-out>"), std::string::npos);
  EXPECT_NE(jc.find("trajectory: passed: 12 steps"), std::string::npos) << jc;
}

// The HTML plots both loss curves and their relative difference with the gate: one point per step
// in each series, the gate curve at r0 sqrt(1 + step) (checked on the drawn y coordinates: on a
// log axis they rise by log10(sqrt(1 + s)) from step 0), the first bad step marked, no script.
TEST_F(TrajectoryReports, HtmlPlotsBothCurvesTheDifferenceAndTheGate) {
  const std::string h = report::render_html(planted);
  EXPECT_NE(h.find("<h2 id=\"trajectories\">Training trajectories</h2>"), std::string::npos);
  EXPECT_EQ(count_in(h, "<script"), 0u);
  EXPECT_EQ(count_in(h, "class=\"lineplot\""), 2u);
  EXPECT_NE(h.find("data-series=\"reference\" data-points=\"12\""), std::string::npos);
  EXPECT_NE(h.find("data-series=\"run\" data-points=\"12\""), std::string::npos);
  EXPECT_NE(h.find("data-series=\"relative difference\" data-points=\"12\""), std::string::npos);
  const auto g = h.find("data-series=\"gate r0·sqrt(1+step)\" data-points=\"12\"");
  ASSERT_NE(g, std::string::npos);
  EXPECT_EQ(count_in(h, "first bad step 1"), 2u);
  // The gate's path: 12 points whose y (SVG grows downward) falls as the gate rises.
  const auto d0 = h.find("<path d=\"M", g);
  ASSERT_NE(d0, std::string::npos);
  const std::string d = h.substr(d0 + 9, h.find('"', d0 + 9) - d0 - 9);
  std::regex pt("([0-9.]+),([0-9.]+)");
  std::vector<double> ys;
  for (auto it = std::sregex_iterator(d.begin(), d.end(), pt); it != std::sregex_iterator(); ++it)
    ys.push_back(std::stod((*it)[2]));
  ASSERT_EQ(ys.size(), 12u) << d;
  // Pixels per decade from steps 0 and 3 (gate doubles: log10 2), then every step checked.
  const double per_decade = (ys[0] - ys[3]) / std::log10(2.0);
  ASSERT_GT(per_decade, 10);
  for (int s = 1; s < 12; ++s)
    EXPECT_NEAR(ys[0] - ys[static_cast<std::size_t>(s)], per_decade * std::log10(std::sqrt(1.0 + s)), 0.15) << s;
  // The planted run's article is marked failed; the clean one's passed.
  EXPECT_NE(h.find("<article class=\"trajectory failed\""), std::string::npos);
  EXPECT_NE(report::render_html(clean).find("<article class=\"trajectory passed\""), std::string::npos);
}

// A 100000-step curve is thinned to 1000 drawn points, and the one spike in it survives.
TEST(TrajectorySvg, LongCurvesAreThinnedKeepingSpikes) {
  svg::LinePlot p;
  svg::Series se{"relative difference", {}, -1};
  for (int i = 0; i < 100000; ++i) se.points.emplace_back(i, i == 54321 ? 1e-2 : 1e-7);
  p.series = {se};
  const std::string out = svg::line_plot(p);
  EXPECT_NE(out.find("data-points=\"1000\""), std::string::npos);
  EXPECT_LT(out.size(), 100000u);
  // The top of the axis is the spike's decade (1e-2), so it was kept.
  EXPECT_NE(out.find(">1e-2</text>"), std::string::npos) << out.substr(0, 2000);
}

}  // namespace
