// Every report names the algorithm a run declared for a tensor and the error-bound model it was
// judged by (docs/compare.md, "Algorithm-aware bounds"): JSON per entry, the terminal's and the
// Markdown's line under a failure, and their list of tensors judged by another model than direct.
#include <gtest/gtest.h>

#include <sstream>

#include "../common/temp_dir.hpp"
#include "../compare/fixture.hpp"
#include "validate/compare/compare.hpp"
#include "validate/report/reporter.hpp"

using namespace validate;
using namespace validate::testing;

namespace {

const Json* entry(const Json& j, const std::string& id) {
  for (const auto& e : j["entries"])
    if (e["id"] == id) return &e;
  return nullptr;
}

}  // namespace

TEST(AlgorithmReport, EveryReportNamesTheAlgorithmAndTheModel) {
  TempDir tmp{"algorithm_report"};
  const std::string ref = tmp / "ref", run = tmp / "run";
  write_reference(ref, {small_case(DType::float32)}, {}, /*scales=*/true);
  RunSpec s;
  s.mutate = [](const std::string& key, Tensor& t) {  // one output element far off: a failure
    if (key == "float32/k0018_ic002/conv2d/output") t.set(5, t.get(5) + 1.0);
  };
  s.edit = [](Json& doc) {
    doc["ops"]["conv2d"]["info"]["algorithms"] = {{"output", "winograd_f2"}, {"grad_input", "fft"}};
    doc["ops"]["matmul"]["info"]["algorithms"] = {{"grad_A", "fft"}};  // no model for a matmul
  };
  write_run(ref, run, s);
  compare::CompareOptions opt;
  opt.ref_dir = ref;
  opt.run_dir = run;
  auto r = compare::compare_sets(opt);
  ASSERT_TRUE(r) << r.message();

  const Json j = report::render_json(*r);
  const Json* out = entry(j, "float32/k0018_ic002/conv2d/output");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ((*out)["algorithm"], "winograd_f2");
  EXPECT_EQ((*out)["bound_model"], "direct + winograd F(2x2,3x3)");
  EXPECT_TRUE((*out)["failed"].get<bool>());
  const Json* gi = entry(j, "float32/k0018_ic002/conv2d/grad_input");
  ASSERT_NE(gi, nullptr);
  EXPECT_EQ((*gi)["algorithm"], "fft");
  EXPECT_EQ((*gi)["bound_model"], "direct + fft (whole plane) + the output's winograd_f2 error through dL/dy");
  const Json* gw = entry(j, "float32/k0018_ic002/conv2d/grad_weight");
  ASSERT_NE(gw, nullptr);
  EXPECT_EQ((*gw)["algorithm"], "direct");
  EXPECT_EQ((*gw)["bound_model"], "direct + the output's winograd_f2 error through dL/dy");
  const Json* mm = entry(j, "float32/k0018_ic002/matmul/output");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ((*mm)["algorithm"], "direct");
  EXPECT_EQ((*mm)["bound_model"], "direct");
  const Json* ga = entry(j, "float32/k0018_ic002/matmul/grad_A");
  ASSERT_NE(ga, nullptr);
  EXPECT_EQ((*ga)["algorithm"], "fft");
  EXPECT_EQ((*ga)["bound_model"], "direct (fft has no model for grad_A of matmul)");
  EXPECT_FALSE((*ga)["failed"].get<bool>());

  const std::string line = "algorithm winograd_f2, bound model: direct + winograd F(2x2,3x3)";
  std::ostringstream term;
  report::render_terminal(term, *r, {false, true});
  EXPECT_NE(term.str().find("  " + line + "\n"), std::string::npos) << term.str();
  EXPECT_NE(term.str().find("float32/k0018_ic002/conv2d/grad_input: algorithm fft, bound model: "),
            std::string::npos);
  EXPECT_EQ(term.str().find("matmul/output: algorithm"), std::string::npos);  // direct: not listed
  const std::string md = report::render_markdown(*r);
  EXPECT_NE(md.find("#### Algorithms"), std::string::npos);
  // Markdown escapes the underscores.
  EXPECT_NE(md.find("  - algorithm winograd\\_f2, bound model: direct + winograd F(2x2,3x3)"), std::string::npos) << md;
  EXPECT_NE(md.find("- float32/k0018\\_ic002/conv2d/grad\\_input: algorithm fft"), std::string::npos) << md;
}
