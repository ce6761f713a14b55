#pragma once
// Shared by the generator tests (tests/generate/test_*.cpp): an odd conv2d case (every size
// different, groups, stride, dilation, bias) with its im2col matmul, a small case file and the
// options that generate it, and the byte-for-byte comparison of two generated sets.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "validate/cases/case.hpp"
#include "validate/core/fs.hpp"
#include "validate/generate/generate.hpp"

namespace validate::testing {

namespace stdfs = std::filesystem;

inline std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

inline cases::Case odd_case(DType dt) {
  cases::Case c;
  c.name = "odd";
  c.dtype = dt;
  auto& cp = c.params<cases::ConvParams>();
  cp.n = 2; cp.c = 4; cp.h = 7; cp.w = 5; cp.o = 6; cp.kh = 3; cp.kw = 2;
  cp.stride = {2, 1}; cp.padding = {1, 0}; cp.dilation = {1, 2}; cp.groups = 2; cp.bias = true;
  c.params<cases::MatmulParams>() = cases::im2col_gemm(cp);
  return c;
}

inline constexpr const char* kSmallCases = R"({"format": "validate-cases/1", "seed": 7, "dtypes": ["float32", "bfloat16"],
  "defaults": {"batch": 1, "height": 6, "width": 5, "out_channels": 3, "kernel": [3, 3], "padding": [1, 1]},
  "sweep": {"in_channels": [2, 4, 8]},
  "cases": [{"name": "g2", "in_channels": 4, "out_channels": 6, "groups": 2, "bias": false, "stride": [2, 1]}]})";

inline std::string write_case_file(const std::string& dir) {
  std::string p = dir + "/cases.json";
  EXPECT_TRUE(fs::write_atomic(p, kSmallCases));
  return p;
}

inline generate::GenerateOptions options(const std::string& cases, const std::string& out) {
  generate::GenerateOptions o;
  o.cases_path = cases;
  o.out = out;
  o.progress = 0;
  return o;
}

// Every file but the two that carry timestamps must be byte-identical.
inline void expect_same_tensors(const std::string& a, const std::string& b, bool require_same_set) {
  int compared = 0;
  for (auto& e : stdfs::recursive_directory_iterator(b)) {
    if (!e.is_regular_file()) continue;
    std::string rel = stdfs::relative(e.path(), b).string();
    // Timestamps live only in the manifest and system_info; config.json and README.md describe the
    // selection (--only, --shard), so they must match only between runs of the same arguments.
    if (rel == "manifest.json" || rel == "system_info.json") continue;
    if (!require_same_set && (rel == "config.json" || rel == "README.md")) continue;
    ASSERT_TRUE(stdfs::exists(stdfs::path(a) / rel)) << rel;
    EXPECT_EQ(slurp((stdfs::path(a) / rel).string()), slurp(e.path().string())) << rel;
    ++compared;
  }
  EXPECT_GT(compared, 10);
  if (require_same_set) {
    int n = 0;
    for (auto& e : stdfs::recursive_directory_iterator(a)) n += e.is_regular_file();
    int m = 0;
    for (auto& e : stdfs::recursive_directory_iterator(b)) m += e.is_regular_file();
    EXPECT_EQ(n, m);
  }
}

}  // namespace validate::testing
