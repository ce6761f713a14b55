// A LibTorch-on-the-CPU run compared with CPU LibTorch references is bit-identical by
// construction: every report format must call it a self-check, and nothing else may be called one.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "../common/temp_dir.hpp"
#include "../compare/fixture.hpp"
#include "validate/compare/compare.hpp"
#include "validate/compare/self_check.hpp"
#include "validate/report/reporter.hpp"

using namespace validate;
using namespace validate::testing;

namespace {

class SelfCheck : public ::testing::Test {
 protected:
  TempDir tmp{"self_check"};
  std::string ref = tmp / "ref", run = tmp / "run";
  void SetUp() override { write_reference(ref, {small_case(DType::float32)}); }
  void system_info(const Json& j) { std::ofstream(ref + "/system_info.json") << j.dump(); }
  compare::Report compare_with(const std::string& backend) {
    RunSpec s;
    s.backend = backend;
    write_run(ref, run, s);
    compare::CompareOptions opt;
    opt.ref_dir = ref;
    opt.run_dir = run;
    auto r = compare::compare_sets(opt);
    EXPECT_TRUE(r) << r.message();
    return r ? std::move(*r) : compare::Report{};
  }
};

TEST_F(SelfCheck, TorchOnTheReferencesDeviceIsLabelledInEveryFormat) {
  system_info({{"device", "cpu"}, {"libtorch_version", "1.13.0"}});
  const auto r = compare_with("torch");
  ASSERT_NE(r.self_check.find("LibTorch 1.13.0 on cpu made both the references and the run"),
            std::string::npos)
      << r.self_check;
  EXPECT_EQ(r.exit_code(), 0);
  EXPECT_NE(r.summary_line().find("self-check"), std::string::npos) << r.summary_line();
  std::ostringstream term;
  report::render_terminal(term, r, {});
  EXPECT_NE(term.str().find("SELF-CHECK: LibTorch 1.13.0 on cpu"), std::string::npos) << term.str();
  // The summary stays the last line, and says it too.
  EXPECT_EQ(term.str().substr(term.str().rfind("validate:")), r.summary_line() + "\n");
  EXPECT_EQ(report::render_json(r)["self_check"], r.self_check);
  EXPECT_NE(report::render_markdown(r).find("> **Self-check:** LibTorch"), std::string::npos);
  const std::string junit = report::render_junit(r);
  EXPECT_NE(junit.find("<testsuites name=\"validate compare (self-check)\""), std::string::npos) << junit;
  EXPECT_NE(junit.find("<property name=\"self_check\" value=\"LibTorch 1.13.0"), std::string::npos);
  const std::string html = report::render_html(r);
  EXPECT_NE(html.find("<p class=\"selfcheck\" id=\"self-check\"><b>Self-check.</b> LibTorch"),
            std::string::npos);
}

TEST_F(SelfCheck, AnotherStackIsNotASelfCheck) {
  system_info({{"device", "cpu"}, {"libtorch_version", "1.13.0"}});
  const auto r = compare_with("oracle");
  EXPECT_EQ(r.self_check, "");
  EXPECT_EQ(r.summary_line().find("self-check"), std::string::npos);
  EXPECT_TRUE(report::render_json(r)["self_check"].is_null());
  EXPECT_EQ(report::render_junit(r).find("self-check"), std::string::npos);
  EXPECT_EQ(report::render_html(r).find("class=\"selfcheck\""), std::string::npos);
  EXPECT_EQ(report::render_markdown(r).find("Self-check"), std::string::npos);
}

TEST(SameStackReason, NeedsTheSameBackendDeviceKindAndVersion) {
  TempDir tmp{"same_stack"};
  const std::string ref = tmp.path();
  auto with_ref = [&](const Json& sys) {
    std::ofstream(ref + "/system_info.json") << sys.dump();
  };
  const Json torch_cpu = {{"backend", "torch"},
                          {"device", "cpu"},
                          {"runner", {{"device", "cpu"}, {"libtorch_version", "1.13.0"}}}};
  EXPECT_EQ(compare::same_stack_reason(ref, torch_cpu), "");  // no system_info.json yet
  with_ref({{"device", "cpu"}, {"libtorch_version", "1.13.0"}});
  EXPECT_NE(compare::same_stack_reason(ref, torch_cpu), "");
  // cuda:1 against references made on cuda: the same kernels.
  with_ref({{"device", "cuda"}, {"libtorch_version", "2.4.0"}});
  const Json torch_cuda1 = {{"backend", "torch"},
                            {"runner", {{"device", "cuda:1"}, {"libtorch_version", "2.4.0"}}}};
  EXPECT_NE(compare::same_stack_reason(ref, torch_cuda1), "");
  // LibTorch on the GPU against CPU references: two stacks.
  with_ref({{"device", "cpu"}, {"libtorch_version", "2.4.0"}});
  EXPECT_EQ(compare::same_stack_reason(ref, torch_cuda1), "");
  // Another LibTorch version on the same device: other kernels, not a self-check.
  with_ref({{"device", "cpu"}, {"libtorch_version", "2.4.0"}});
  EXPECT_EQ(compare::same_stack_reason(ref, torch_cpu), "");
  // cuDNN on the references' device.
  with_ref({{"device", "cuda"}});
  EXPECT_EQ(compare::same_stack_reason(ref, Json{{"backend", "cudnn"}, {"device", "cuda"}}), "");
  // A corrupt system_info.json says nothing either way.
  std::ofstream(ref + "/system_info.json") << "{not json";
  EXPECT_EQ(compare::same_stack_reason(ref, torch_cpu), "");
}

}  // namespace
