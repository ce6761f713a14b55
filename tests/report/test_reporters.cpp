// The reporters render one comparison with every kind of verdict: JSON must parse and carry every
// metric, JUnit's testcase/failure/skipped counts must agree with the terminal summary, the HTML
// must be self-contained, and colour appears only when asked for.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

#include "../common/temp_dir.hpp"
#include "../compare/fixture.hpp"
#include "validate/compare/compare.hpp"
#include "validate/report/reporter.hpp"

using namespace validate;
using namespace validate::testing;

namespace {

std::size_t count(const std::string& s, const std::string& sub) {
  std::size_t n = 0;
  for (auto p = s.find(sub); p != std::string::npos; p = s.find(sub, p + 1)) ++n;
  return n;
}

class Reporters : public ::testing::Test {
 protected:
  TempDir tmp{"reporters"};
  compare::Report report;
  void SetUp() override {
    const std::string ref = tmp / "ref", run = tmp / "run";
    const auto f32 = small_case(DType::float32), bf16 = small_case(DType::bfloat16);
    write_reference(ref, {f32, bf16});
    RunSpec s;
    s.mutate = [](const std::string& key, Tensor& t) {
      if (key == "float32/k0018_ic002/conv2d/grad_weight") {  // flipped filter gradient -> failed +
                                                              // diagnosis
        Tensor f(t.dtype(), t.shape());
        const auto& sh = t.shape();
        for (std::int64_t i = 0; i < t.numel(); ++i) {
          const std::int64_t w = i % sh[3], h = (i / sh[3]) % sh[2], rest = i / (sh[3] * sh[2]);
          f.set((rest * sh[2] + (sh[2] - 1 - h)) * sh[3] + (sh[3] - 1 - w), t.get(i));
        }
        t = std::move(f);
      }
      if (key == "bfloat16/k0018_ic002/matmul/grad_A")
        t.set(3, std::numeric_limits<double>::infinity());
    };
    s.edit = [](Json& doc) {
      if (doc["dtype"] == "bfloat16") {
        doc["ops"]["conv2d"]["outcome"] = "error";
        doc["ops"]["conv2d"]["message"] = "backend crashed <badly> & \"loudly\"";
      } else {
        doc["ops"]["matmul"]["produced"] =
            Json::array({"output", "loss", "grad_A"});  // grad_B not run
      }
    };
    write_run(ref, run, s);
    compare::CompareOptions opt;
    opt.ref_dir = ref;
    opt.run_dir = run;
    auto r = compare::compare_sets(opt);
    ASSERT_TRUE(r) << r.message();
    report = std::move(*r);
  }
};

}  // namespace

TEST_F(Reporters, TheScenarioHasEveryKindOfVerdict) {
  const auto c = report.counts();
  EXPECT_EQ(c.failed, 2);   // flipped grad_weight, Inf in grad_A
  EXPECT_EQ(c.error, 1);    // bfloat16 conv2d
  EXPECT_EQ(c.not_run, 1);  // float32 grad_B
  EXPECT_EQ(c.passed, 3 + 4 + 3);
  EXPECT_EQ(report.exit_code(), 1);
  EXPECT_EQ(report.summary_line(), "validate: 10 passed, 3 failed, 1 not run (1 runner error)");
}

TEST_F(Reporters, JsonParsesAndCarriesEveryMetric) {
  const std::string text = report::render_json(report).dump(2);
  const Json j = Json::parse(text);  // must be valid JSON
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["summary"]["passed"], 10);
  EXPECT_EQ(j["summary"]["failed"], 3);
  EXPECT_EQ(j["summary"]["not_run"], 1);
  EXPECT_EQ(j["summary"]["exit_code"], 1);
  ASSERT_EQ(j["entries"].size(), report.entries.size());
  int failed = 0;
  for (const auto& e : j["entries"]) {
    for (const char* k : {"id", "variant", "dtype", "case", "op", "tensor", "role", "verdict",
                          "message", "repro", "checks"})
      EXPECT_TRUE(e.contains(k)) << k;
    failed += e["failed"].get<bool>();
    if (e["id"] == "float32/k0018_ic002/conv2d/grad_weight") {
      const Json& m = e["metrics"];
      for (const char* k : {"max_abs", "mean_abs", "max_rel", "mean_rel", "pcc", "beyond_tolerance",
                            "min_atol", "min_rtol", "ulp", "ulp_near_zero", "nonfinite",
                            "worst_abs", "near_zero_floor", "ref_zero_fraction"})
        EXPECT_TRUE(m.contains(k)) << k;
      for (const char* k : {"max", "mean", "p50", "p99", "p999", "histogram"})
        EXPECT_TRUE(m["ulp"].contains(k)) << k;
      EXPECT_TRUE(m["worst_abs"]["coords"].get<std::string>().rfind("o=", 0) == 0);
      EXPECT_EQ(e["diagnosis"]["matches"][0]["spec"], "OIHW+flip=HW");
      // the machine-readable diagnosis.
      const Json& d = e["diagnosis"];
      EXPECT_EQ(d["code"], "flipped");
      EXPECT_EQ(d["tensor"], "grad_weight");
      EXPECT_EQ(d["side"], "output");
      EXPECT_EQ(d["params"]["flipped"], "HW");
      EXPECT_EQ(d["params"]["bytes"], "OIHW+flip=HW");
      EXPECT_EQ(d["residual"], 0.0);
      EXPECT_EQ(d["ambiguous"], false);
      EXPECT_NE(
          e["repro"].get<std::string>().find("--only '^float32/k0018_ic002/conv2d/grad_weight$'"),
          std::string::npos);
    }
    if (e["id"] == "float32/k0018_ic002/conv2d/loss") {
      EXPECT_TRUE(e.contains("loss"));
    }
  }
  EXPECT_EQ(failed, 3);
  // The file reporter writes the same document.
  const std::string path = tmp / "r.json";
  ASSERT_TRUE(report::make_json_reporter(path)->report(report));
  std::ifstream in(path);
  EXPECT_EQ(Json::parse(in)["entries"].size(), report.entries.size());
}

// --junit-suite: several compares on one CI page are told apart by their suites (scripts/nightly.sh
// names them after its stage); the default keeps "validate.<dtype>".
TEST_F(Reporters, JunitSuitesCarryTheGivenName) {
  const std::string d = report::render_junit(report);
  const std::string x = report::render_junit(report, "compare/run<1>");
  EXPECT_EQ(count(d, "<testsuite name=\"validate."), count(d, "<testsuite "));
  EXPECT_EQ(count(x, "<testsuite name=\"compare/run&lt;1&gt;."), count(x, "<testsuite "));
  EXPECT_EQ(count(x, "<testcase classname=\"compare/run&lt;1&gt;."), report.entries.size());
  EXPECT_EQ(count(x, "validate."), 0u);
  EXPECT_NE(x.find("<testsuites name=\"compare/run&lt;1&gt;\" tests=\"14\" failures=\"3\""), std::string::npos);
  EXPECT_EQ(count(x, "<failure "), count(d, "<failure "));
}

TEST_F(Reporters, JunitCountsAgreeWithTheTerminal) {
  const std::string x = report::render_junit(report);
  EXPECT_EQ(x.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>", 0), 0u);
  EXPECT_EQ(count(x, "<testcase "), report.entries.size());
  EXPECT_EQ(count(x, "</testcase>"), report.entries.size());
  EXPECT_EQ(count(x, "<failure "), 3u);  // = "3 failed" in the summary line
  EXPECT_EQ(count(x, "<skipped "), 1u);  // = "1 not run"
  EXPECT_EQ(count(x, "<testsuite "), count(x, "</testsuite>"));
  EXPECT_NE(x.find("<testsuites name=\"validate compare\" tests=\"14\" failures=\"3\" errors=\"0\" "
                   "skipped=\"1\""),
            std::string::npos);
  // Attribute text is escaped.
  EXPECT_NE(x.find("backend crashed &lt;badly&gt; &amp; &quot;loudly&quot;"), std::string::npos);
  EXPECT_EQ(x.find("<badly>"), std::string::npos);
  // The terminal says the same numbers.
  std::ostringstream t;
  report::render_terminal(t, report, {});
  EXPECT_NE(t.str().find("validate: 10 passed, 3 failed, 1 not run"), std::string::npos);
}

TEST_F(Reporters, HtmlIsSelfContained) {
  const std::string h = report::render_html(report);
  EXPECT_EQ(h.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_GE(count(h, "<svg"), 3u);  // histograms, error-versus-K plots
  EXPECT_EQ(count(h, "<script"), 0u);
  EXPECT_EQ(count(h, "<link"), 0u);
  EXPECT_EQ(count(h, " src="), 0u);
  EXPECT_EQ(count(h, "@import"), 0u);
  EXPECT_EQ(count(h, "url("), 0u);
  // The only URLs are SVG namespace declarations, which browsers never fetch.
  EXPECT_EQ(count(h, "http"), count(h, "xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_NE(h.find("validate: 10 passed, 3 failed, 1 not run"), std::string::npos);
  EXPECT_NE(h.find("Error versus K"), std::string::npos);
  EXPECT_NE(h.find("H and W flipped"), std::string::npos);
  EXPECT_EQ(h.find("<badly>"), std::string::npos);  // escaped
}

TEST_F(Reporters, MarkdownLeadsWithTheVerdict) {
  const std::string m = report::render_markdown(report);
  EXPECT_EQ(m.rfind("### ❌ validate: 10 passed, 3 failed, 1 not run", 0), 0u) << m.substr(0, 80);
  EXPECT_NE(m.find("**Diagnosis:**"), std::string::npos);
  EXPECT_NE(m.find(" `flipped`\n"), std::string::npos) << m;  // the diagnosis code
  EXPECT_NE(m.find("Repro: `validate compare"), std::string::npos);
  EXPECT_NE(m.find("<details>"), std::string::npos);
  EXPECT_EQ(count(m, "| ❌ |"), 3u);
}

TEST_F(Reporters, ColourOnlyWhenAsked) {
  std::ostringstream plain, colour;
  report::render_terminal(plain, report, {false, false});
  report::render_terminal(colour, report, {true, false});
  EXPECT_EQ(plain.str().find('\033'), std::string::npos);
  EXPECT_NE(colour.str().find("\033[1;31m"), std::string::npos);
  // The summary is the last line.
  const std::string s = plain.str();
  EXPECT_EQ(s.substr(s.rfind("validate:")), report.summary_line() + "\n");
  ::setenv("NO_COLOR", "1", 1);
  EXPECT_FALSE(report::wants_color(1));
  ::unsetenv("NO_COLOR");
}

TEST_F(Reporters, ReportsAreWrittenAtomically) {
  const std::string dir = tmp / "out";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(report::make_html_reporter(dir + "/r.html")->report(report));
  ASSERT_TRUE(report::make_junit_reporter(dir + "/r.xml")->report(report));
  ASSERT_TRUE(report::make_markdown_reporter(dir + "/r.md")->report(report));
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos);  // no leftovers
  EXPECT_FALSE(report::make_json_reporter(tmp / "missing/dir/r.json")->report(report));
}
