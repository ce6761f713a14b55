// A generated set is the same bytes on every run, under --only and across shards, and shards merge
// to the unsharded set's bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "common/temp_dir.hpp"
#include "generate/generate_fixture.hpp"
#include "validate/cases/merge.hpp"
#include "validate/cases/verify.hpp"
#include "validate/core/fs.hpp"
#include "validate/generate/generate.hpp"
#include "validate/generate/set_writer.hpp"

using namespace validate;
namespace stdfs = std::filesystem;
using validate::testing::write_case_file;
using validate::testing::options;
using validate::testing::expect_same_tensors;

TEST(Generate, DeterministicAcrossRunsOnlyAndShards) {
  validate::testing::TempDir tmp("det");
  const std::string dir = tmp.path();
  std::string cf = write_case_file(dir);
  std::ostringstream log;
  auto a = generate::generate(options(cf, dir + "/a"), log);
  ASSERT_TRUE(a) << a.message();
  EXPECT_EQ(a->cases_ok, 8);
  auto b = generate::generate(options(cf, dir + "/b"), log);
  ASSERT_TRUE(b) << b.message();
  expect_same_tensors(dir + "/a", dir + "/b", true);

  auto only = options(cf, dir + "/only");
  only.only = "^bfloat16/k0036_ic004$";
  auto o = generate::generate(only, log);
  ASSERT_TRUE(o) << o.message();
  EXPECT_EQ(o->cases_ok, 1);
  expect_same_tensors(dir + "/a", dir + "/only", false);

  int total = 0;
  for (int i = 0; i < 3; ++i) {
    auto sh = options(cf, dir + "/shard" + std::to_string(i));
    sh.shard = {i, 3};
    auto s = generate::generate(sh, log);
    ASSERT_TRUE(s) << s.message();
    total += s->cases_ok;
    expect_same_tensors(dir + "/a", sh.out, false);
  }
  EXPECT_EQ(total, 8);
  auto rep = cases::verify_set(dir + "/a");
  ASSERT_TRUE(rep) << rep.message();
  EXPECT_TRUE(rep->ok());
  // 6 sweep cases with bias: 4 conv inputs + 3 matmul; 2 grouped cases without bias: 3 + 3.
  EXPECT_EQ(rep->inputs_checked, 6u * 7u + 2u * 6u);
}

TEST(Merge, ShardsMergeToTheUnshardedBytesAndOverlapIsRefused) {
  validate::testing::TempDir tmp("merge");
  const std::string dir = tmp.path();
  std::string cf = write_case_file(dir);
  std::ostringstream log;
  ASSERT_TRUE(generate::generate(options(cf, dir + "/full"), log));
  std::vector<std::string> shards;
  for (int i = 0; i < 3; ++i) {
    auto sh = options(cf, dir + "/s" + std::to_string(i));
    sh.shard = {i, 3};
    ASSERT_TRUE(generate::generate(sh, log));
    shards.push_back(sh.out);
  }
  auto m = cases::merge_sets(dir + "/merged", shards);
  ASSERT_TRUE(m) << m.message();
  EXPECT_EQ(m->cases, 8u);
  expect_same_tensors(dir + "/full", dir + "/merged", false);
  expect_same_tensors(dir + "/merged", dir + "/full", false);
  auto rep = cases::verify_set(dir + "/merged");
  ASSERT_TRUE(rep) << rep.message();
  EXPECT_TRUE(rep->ok());
  auto overlap = cases::merge_sets(dir + "/bad", {shards[0], shards[1], shards[0]});
  ASSERT_FALSE(overlap);
  EXPECT_NE(overlap.message().find("overlap"), std::string::npos) << overlap.message();
  stdfs::remove(shards[2] + "/manifest.json");
  auto incomplete = cases::merge_sets(dir + "/bad2", shards);
  ASSERT_FALSE(incomplete);
  EXPECT_NE(incomplete.message().find("incomplete"), std::string::npos) << incomplete.message();
}

// --direct-io writes the large tensors past the page cache: the set is the same bytes, and verify
// reads back every hash. The case makes an im2col A of 1024 x 2304 floats (9.4 MB), over the
// 8 MiB threshold, beside smaller files that take the ordinary path.
TEST(Generate, DirectIoWritesTheSameBytes) {
  validate::testing::TempDir tmp("direct");
  const std::string dir = tmp.path();
  const std::string cf = dir + "/cases.json";
  ASSERT_TRUE(fs::write_atomic(cf, R"({"format": "validate-cases/1", "seed": 7, "loss": "mse", "dtypes": ["float32"],
    "defaults": {"batch": 1, "height": 32, "width": 32, "out_channels": 8, "kernel": [3, 3], "padding": [1, 1],
                 "stride": [1, 1], "dilation": [1, 1], "groups": 1, "bias": true},
    "sweep": {"in_channels": [256]}})"));
  std::ostringstream log;
  auto a = generate::generate(options(cf, dir + "/a"), log);
  ASSERT_TRUE(a) << a.message();
  auto direct = options(cf, dir + "/b");
  direct.direct_io = true;
  auto b = generate::generate(direct, log);
  ASSERT_TRUE(b) << b.message();
  std::uintmax_t largest = 0;
  for (auto& e : stdfs::recursive_directory_iterator(dir + "/b"))
    if (e.is_regular_file()) largest = std::max(largest, e.file_size());
  EXPECT_GE(largest, std::uintmax_t(generate::SetWriter::kDirectBytes)) << "no file took the direct path";
  expect_same_tensors(dir + "/a", dir + "/b", true);
  auto rep = cases::verify_set(dir + "/b");
  ASSERT_TRUE(rep) << rep.message();
  EXPECT_TRUE(rep->ok());
}

// --resume keeps every file of a finished case in the manifest, the stored choice terms included
// (a bfloat16 conv output's bias-after term, each bfloat16 gradient's dL/dy choice): a resumed set
// lists the same files as the run it resumed, and verifies.
TEST(Generate, ResumeListsEveryFileOfTheCasesItKeeps) {
  validate::testing::TempDir tmp("resume");
  const std::string dir = tmp.path();
  const std::string cf = write_case_file(dir);
  std::ostringstream log;
  auto a = generate::generate(options(cf, dir + "/a"), log);
  ASSERT_TRUE(a) << a.message();
  auto listed = [&] {
    std::vector<std::string> files;
    auto m = read_json(dir + "/a/manifest.json");
    EXPECT_TRUE(m) << m.message();
    if (m)
      for (const auto& [rel, entry] : (*m)["files"].items()) files.push_back(rel);
    return files;
  };
  const auto before = listed();
  const auto outputs = std::count_if(before.begin(), before.end(), [](const std::string& f) {
    return f.find("_conv2d_output_choice.npy") != std::string::npos;
  });
  EXPECT_GT(outputs, 0) << "no bias-after term in the set: the test cannot fail";
  auto resume = options(cf, dir + "/a");
  resume.resume = true;
  auto b = generate::generate(resume, log);
  ASSERT_TRUE(b) << b.message();
  EXPECT_EQ(b->cases_resumed, 8);
  EXPECT_EQ(listed(), before);
  auto rep = cases::verify_set(dir + "/a");
  ASSERT_TRUE(rep) << rep.message();
  EXPECT_TRUE(rep->ok());
}
