// The rounding_bias check of `validate compare` on gradients, end to end: a bfloat16 set of batch 3,
// 4 channels, 19 x 6, 5 output channels (every axis a different size); the run's grad_input and
// matmul grad_A stored by truncation from the values the reference rounded to nearest fail the
// check with the bias named, over blocks of elements sharing dL/dy elements; the same values
// rounded to nearest after a relative noise of 2^-12 (another correct stack) pass it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "../common/bfloat16_truncation.hpp"
#include "../common/temp_dir.hpp"
#include "commands.hpp"
#include "fixture.hpp"

using namespace validate;
using namespace validate::testing;

namespace {

int run_compare(const std::vector<std::string>& extra) {
  CLI::App app{"validate"};
  int code = 0;
  validate::cli::register_compare(app, code);
  std::vector<std::string> args = {"validate", "compare"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  app.parse(static_cast<int>(argv.size()), argv.data());
  (void)::testing::internal::GetCapturedStdout();
  (void)::testing::internal::GetCapturedStderr();
  return code;
}

cases::Case odd_case() {
  cases::Case c;
  c.name = "odd_n3_c4_h19_w6";
  c.dtype = DType::bfloat16;
  cases::ConvParams p;
  p.n = 3, p.c = 4, p.h = 19, p.w = 6, p.o = 5, p.kh = 3, p.kw = 3;
  p.padding = {1, 1};
  c.ops = cases::Case::conv_with_im2col(c.name, p).ops;  // matmul M 342, K 36, N 5
  return c;
}

// The exact value of element i of a planted tensor: normal, seeded by the element, of standard
// deviation 1/16 (under what the set's scales allow a gradient of these inputs to be).
double exact(std::int64_t i) {
  std::mt19937 gen(static_cast<unsigned>(i) * 2654435761u + 7);
  return std::normal_distribution<double>(0, 1)(gen) / 16;
}

bool planted(const std::string& key) {
  return key == "bfloat16/odd_n3_c4_h19_w6/conv2d/grad_input" || key == "bfloat16/odd_n3_c4_h19_w6/matmul/grad_A";
}

}  // namespace

TEST(CompareBias, AGradientStoredByTruncationIsNamedAnotherCorrectRoundingIsNot) {
  TempDir tmp{"compare_bias"};
  const std::string ref = tmp / "ref", cut = tmp / "cut", near = tmp / "near";
  write_reference(ref, {odd_case()}, [](const std::string& key, Tensor& t) {
    if (planted(key))
      for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, round_to_dtype(static_cast<float>(exact(i)), DType::bfloat16));
  }, true, true);
  RunSpec s;
  s.mutate = [](const std::string& key, Tensor& t) {
    if (planted(key))
      for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, validate::testing::bfloat16_truncated(static_cast<float>(exact(i))));
  };
  write_run(ref, cut, s);
  s.mutate = [](const std::string& key, Tensor& t) {
    if (planted(key))
      for (std::int64_t i = 0; i < t.numel(); ++i)
        t.set(i, round_to_dtype(static_cast<float>(exact(i) * (1 + 0x1p-8 * exact(i + 100000))), DType::bfloat16));
  };
  write_run(ref, near, s);
  for (const auto& [run, expect_biased] : {std::pair{cut, true}, {near, false}}) {
    const std::string js = run + ".json";
    EXPECT_EQ(run_compare({ref, run, "--json", js, "--color", "never"}), expect_biased ? 1 : 0) << run;
    auto doc = read_json(js);
    ASSERT_TRUE(doc) << doc.message();
    int seen = 0;
    for (const auto& e : (*doc)["entries"]) {
      if (!planted(e["id"].get<std::string>())) continue;
      for (const auto& c : e["checks"])
        if (c["name"] == "rounding_bias") {
          ++seen;
          // grad_input: 57 blocks (sample x row), lag 2, 19 groups: t* of 18 degrees of freedom;
          // grad_A: 342 rows, t* of 341.
          EXPECT_GT(c["limit"].get<double>(), 6.0) << e.dump();
          EXPECT_EQ(c["passed"].get<bool>(), !expect_biased) << e.dump();
          if (expect_biased) {
            EXPECT_GT(c["value"].get<double>(), 2 * c["limit"].get<double>()) << e.dump();
          }
        }
      if (expect_biased) {
        EXPECT_NE(e["message"].get<std::string>().find("lean toward zero"), std::string::npos) << e["message"];
      }
    }
    EXPECT_EQ(seen, 2) << run;
  }
}
