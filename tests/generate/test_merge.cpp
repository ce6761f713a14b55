// `validate merge` on shards made by the real generator: the merged set equals the unsharded run
// (tensors, config.json less its selection, README case table), and everything that would make a
// merged set lie is refused with a message naming the shard: an incomplete cover (unless
// --allow-partial), a non-empty output directory, shards of different seeds, fills, --only or
// splits, and overlapping shards.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "commands.hpp"
#include "common/temp_dir.hpp"
#include "validate/cases/merge.hpp"
#include "validate/cases/verify.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/json_io.hpp"
#include "validate/generate/generate.hpp"
#include "validate/layout/preset.hpp"
#include "validate/backends/oracle_runner.hpp"
#include "validate/backends/run_driver.hpp"

using namespace validate;
namespace stdfs = std::filesystem;

namespace {

// 4 geometries x 2 dtypes = 8 items, dtype-major: float32 k0018 k0036 k0072 g2, then bfloat16.
const char* kSweep = R"({"format": "validate-cases/1", "seed": 7, "dtypes": ["float32", "bfloat16"],
  "defaults": {"batch": 1, "height": 6, "width": 5, "out_channels": 3, "kernel": [3, 3], "padding": [1, 1]},
  "sweep": {"in_channels": [2, 4, 8]},
  "cases": [{"name": "g2", "in_channels": 4, "out_channels": 6, "groups": 2, "bias": false, "stride": [2, 1]}]})";
// The unsharded order, written out by hand from the case-file rules (not read from any set).
const std::vector<std::string> kSweepOrder = {
    "float32/k0018_ic002",  "float32/k0036_ic004",  "float32/k0072_ic008",  "float32/g2",
    "bfloat16/k0018_ic002", "bfloat16/k0036_ic004", "bfloat16/k0072_ic008", "bfloat16/g2"};

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

Json json_at(const std::string& p) {
  auto j = read_json(p);
  EXPECT_TRUE(j) << j.message();
  return j ? *j : Json();
}

std::vector<std::string> expanded_keys(const Json& config) {
  std::vector<std::string> keys;
  for (const auto& c : config.at("expanded_cases"))
    keys.push_back(c.at("dtype").get<std::string>() + "/" + c.at("name").get<std::string>());
  return keys;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// One generated sweep and its shards, shared by every test (generation is the slow part).
class MergeSets : public ::testing::Test {
 protected:
  static inline validate::testing::TempDir* tmp = nullptr;
  static std::string dir() { return tmp->path(); }
  static std::string shard(int i) { return dir() + "/s" + std::to_string(i); }

  static generate::GenerateOptions options(const std::string& out) {
    generate::GenerateOptions o;
    o.cases_path = dir() + "/cases.json";
    o.out = out;
    o.progress = 0;
    return o;
  }
  static void make(const generate::GenerateOptions& o) {
    std::ostringstream log;
    auto r = generate::generate(o, log);
    ASSERT_TRUE(r) << r.message();
    ASSERT_EQ(r->cases_failed, 0) << log.str();
  }
  static void SetUpTestSuite() {
    tmp = new validate::testing::TempDir("merge_suite");
    ASSERT_TRUE(fs::write_atomic(dir() + "/cases.json", kSweep));
    make(options(dir() + "/full"));
    for (int i = 0; i < 3; ++i) {
      auto o = options(shard(i));
      o.shard = {i, 3};
      make(o);
    }
  }
  static void TearDownTestSuite() {
    delete tmp;
    tmp = nullptr;
  }
  std::string out(const std::string& name) const { return dir() + "/" + name; }
};

TEST_F(MergeSets, ShardsGivenInAnyOrderMergeToTheUnshardedSet) {
  // Shards in scrambled order: the merged order must not depend on the command line.
  auto m = cases::merge_sets(out("merged"), {shard(2), shard(0), shard(1)});
  ASSERT_TRUE(m) << m.message();
  EXPECT_EQ(m->shards, 3u);
  EXPECT_EQ(m->cases, 8u);
  EXPECT_TRUE(m->missing.empty());

  // Every case file byte for byte, and the same files on both sides.
  auto case_files = [](const std::string& root) {
    std::set<std::string> rels;
    for (const auto& e : stdfs::recursive_directory_iterator(root)) {
      const std::string rel = stdfs::relative(e.path(), root).string();
      if (e.is_regular_file() && rel.find('/') != std::string::npos) rels.insert(rel);
    }
    return rels;
  };
  const auto rels = case_files(out("merged"));
  EXPECT_EQ(rels, case_files(dir() + "/full"));
  // Per case 7 matmul files and their 3 error-bound scales (output, grad_A, grad_B), a metadata
  // file and 9 conv files with 4 scales (7 and 3 for g2, which has no bias); each bfloat16 and
  // float16 gradient also has its dL/dy choice term: 5 per such case, 4 for the bfloat16 g2 case;
  // and each such conv output with a bias its bias-after term: 1 per such case, none for g2.
  EXPECT_EQ(rels.size(), 6u * (9 + 4 + 7 + 3 + 1) + 2u * (7 + 3 + 7 + 3 + 1) + 3u * (5 + 1) + 4u);
  for (const auto& rel : rels)
    EXPECT_EQ(slurp(out("merged/" + rel)), slurp(dir() + "/full/" + rel)) << rel;

  // config.json: the unsharded one but for "selection" (which records the merge).
  Json merged = json_at(out("merged/config.json"));
  Json full = json_at(dir() + "/full/config.json");
  EXPECT_EQ(expanded_keys(merged), kSweepOrder);
  EXPECT_EQ(merged.at("dtypes"), Json::parse(R"(["float32", "bfloat16"])"));
  EXPECT_EQ(merged.at("selection").at("merged_from").size(), 3u);
  EXPECT_FALSE(merged.at("selection").contains("partial"));
  merged.erase("selection");
  full.erase("selection");
  EXPECT_EQ(merged, full);

  auto rep = cases::verify_set(out("merged"));
  ASSERT_TRUE(rep) << rep.message();
  EXPECT_TRUE(rep->ok());
  EXPECT_TRUE(rep->warnings.empty()) << rep->warnings.front();
}

TEST_F(MergeSets, MergedSetHasTheGeneratedReadmeInTheManifest) {
  ASSERT_TRUE(cases::merge_sets(out("readme"), {shard(0), shard(1), shard(2)}));
  const std::string readme = slurp(out("readme/README.md"));
  EXPECT_TRUE(contains(readme, "# validate reference set")) << readme;
  EXPECT_TRUE(contains(
      readme, "8 case(s) from 3 shards merged by `validate merge`, seed 7, fill `random`."))
      << readme;
  EXPECT_TRUE(contains(readme, "## Load and verify with numpy")) << readme;
  // The case table is generate's, row for row in the unsharded order.
  const std::string full = slurp(dir() + "/full/README.md");
  ASSERT_NE(full.find("## Cases"), std::string::npos);
  EXPECT_EQ(readme.substr(readme.find("## Cases")), full.substr(full.find("## Cases")));
  EXPECT_TRUE(
      contains(readme, "| bfloat16 | g2 | 18 | [1, 4, 6, 5] | [6, 2, 3, 3] | [15, 18] | [18, 6] |"))
      << readme;
  const Json manifest = json_at(out("readme/manifest.json"));
  ASSERT_TRUE(manifest.at("files").contains("README.md"));
  EXPECT_EQ(manifest.at("files").at("README.md").at("size").get<std::size_t>(), readme.size());
}

TEST_F(MergeSets, DtypesAreTheUnionInSweepOrderEvenWhenTheFirstShardHasOne) {
  // One geometry, two dtypes, two shards: shard 0 is float32 only, shard 1 bfloat16 only.
  const std::string cf = out("one.json");
  ASSERT_TRUE(fs::write_atomic(cf, R"({"seed": 3, "dtypes": ["float32", "bfloat16"],
    "defaults": {"height": 4, "width": 4, "out_channels": 2}, "sweep": {"in_channels": [2]}})"));
  for (int i = 0; i < 2; ++i) {
    auto o = options(out("one_s" + std::to_string(i)));
    o.cases_path = cf;
    o.shard = {i, 2};
    make(o);
  }
  EXPECT_EQ(json_at(out("one_s1/config.json")).at("dtypes"), Json::parse(R"(["bfloat16"])"));
  auto m = cases::merge_sets(out("one_merged"), {out("one_s1"), out("one_s0")});
  ASSERT_TRUE(m) << m.message();
  const Json c = json_at(out("one_merged/config.json"));
  EXPECT_EQ(c.at("dtypes"), Json::parse(R"(["float32", "bfloat16"])"));
  EXPECT_EQ(expanded_keys(c),
            (std::vector<std::string>{"float32/k0018_ic002", "bfloat16/k0018_ic002"}));
}

TEST_F(MergeSets, IncompleteCoverIsRefusedUnlessAllowPartial) {
  auto refused = cases::merge_sets(out("partial_refused"), {shard(0), shard(1)});
  ASSERT_FALSE(refused);
  EXPECT_TRUE(contains(refused.message(), "incomplete: shard 2/3 missing (2 of 3 given)"))
      << refused.message();
  EXPECT_TRUE(contains(refused.message(), "--allow-partial")) << refused.message();
  EXPECT_FALSE(stdfs::exists(out("partial_refused/manifest.json")));

  cases::MergeOptions opt;
  opt.allow_partial = true;
  auto m = cases::merge_sets(out("partial"), {shard(1), shard(0)}, opt);
  ASSERT_TRUE(m) << m.message();
  EXPECT_EQ(m->missing, std::vector<std::string>{"2/3"});
  EXPECT_EQ(m->cases, 6u);  // shards 0 and 1 of 8 items: 3 + 3
  const Json c = json_at(out("partial/config.json"));
  // Items 0, 1, 3, 4, 6, 7 of the sweep, in that order.
  EXPECT_EQ(expanded_keys(c),
            (std::vector<std::string>{kSweepOrder[0], kSweepOrder[1], kSweepOrder[3],
                                      kSweepOrder[4], kSweepOrder[6], kSweepOrder[7]}));
  EXPECT_EQ(c.at("selection").at("partial"), true);
  EXPECT_EQ(c.at("selection").at("missing_shards"), Json::parse(R"(["2/3"])"));
  EXPECT_EQ(json_at(out("partial/manifest.json")).at("partial"), true);
  auto rep = cases::verify_set(out("partial"));
  ASSERT_TRUE(rep) << rep.message();
  EXPECT_TRUE(rep->ok());
}

TEST_F(MergeSets, OutputDirectoryMustBeNewOrEmpty) {
  ASSERT_TRUE(fs::make_dirs(out("stale/float32")));
  ASSERT_TRUE(fs::write_atomic(out("stale/float32/old_case_metadata.json"), "{}"));
  auto r = cases::merge_sets(out("stale"), {shard(0), shard(1), shard(2)});
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.message(), out("stale") + " exists and is not empty")) << r.message();
  EXPECT_FALSE(stdfs::exists(out("stale/manifest.json")));
  EXPECT_TRUE(stdfs::exists(out("stale/float32/old_case_metadata.json")));  // left as it was

  ASSERT_TRUE(fs::write_atomic(out("a_file"), "x"));
  auto f = cases::merge_sets(out("a_file"), {shard(0), shard(1), shard(2)});
  ASSERT_FALSE(f);
  EXPECT_TRUE(contains(f.message(), "is not a directory")) << f.message();

  ASSERT_TRUE(fs::make_dirs(out("empty")));
  EXPECT_TRUE(cases::merge_sets(out("empty"), {shard(0), shard(1), shard(2)}));
}

TEST_F(MergeSets, ShardsOfDifferentSeedsFillsSelectionsOrSplitsAreRefused) {
  auto seeded = options(out("seed8_s1"));
  seeded.shard = {1, 3};
  seeded.seed = 8;
  make(seeded);
  auto r = cases::merge_sets(out("m_seed"), {shard(0), seeded.out, shard(2)});
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.message(), seeded.out + "/config.json has seed 8 but")) << r.message();
  EXPECT_TRUE(contains(r.message(), "has 7: shards of different sweeps")) << r.message();

  auto exact = options(out("exact_s1"));
  exact.shard = {1, 3};
  exact.fill = generate::Fill::exact;
  make(exact);
  r = cases::merge_sets(out("m_fill"), {shard(0), exact.out, shard(2)});
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.message(), "has fill \"exact\" but")) << r.message();

  auto only = options(out("only_s1"));
  only.shard = {1, 3};
  only.only = "k00";
  make(only);
  r = cases::merge_sets(out("m_only"), {shard(0), only.out, shard(2)});
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.message(), "selected --only 'k00'")) << r.message();

  // Shard 1/4 (items 1 and 5) shares no case with shard 0/3 (items 0, 3, 6): only the split
  // differs.
  auto quarter = options(out("quarter_1"));
  quarter.shard = {1, 4};
  make(quarter);
  r = cases::merge_sets(out("m_split"), {shard(0), quarter.out});
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.message(), quarter.out + " is shard 1/4 but")) << r.message();
  EXPECT_TRUE(contains(r.message(), "is shard 0/3: shards of different splits")) << r.message();
}

TEST_F(MergeSets, OverlappingShardsAreRefused) {
  auto twice = cases::merge_sets(out("m_twice"), {shard(0), shard(1), shard(2), shard(1)});
  ASSERT_FALSE(twice);
  EXPECT_TRUE(contains(twice.message(), "shards overlap")) << twice.message();
  EXPECT_TRUE(contains(twice.message(), shard(1))) << twice.message();

  // A copy of shard 1 under another name claims the same cases.
  stdfs::copy(shard(1), out("s1_copy"), stdfs::copy_options::recursive);
  auto copy = cases::merge_sets(out("m_copy"), {shard(0), shard(1), shard(2), out("s1_copy")});
  ASSERT_FALSE(copy);
  EXPECT_TRUE(contains(copy.message(), "shards overlap")) << copy.message();
}

// Run directories are merged the same way: `validate run --shard i/n` records its selection in
// run_info.json, and the shards of one run (same backend, layout and reference) make the whole.
TEST_F(MergeSets, RunShardsMergeToTheUnshardedRunAndMustCoverTheSplit) {
  auto run = [&](const std::string& dest, cases::Shard shard, const char* layout_name) {
    auto layouts = layout::load_layout(layout_name);
    ASSERT_TRUE(layouts) << layouts.message();
    auto runner = runners::make_oracle_runner(*layouts);
    runners::RunOptions o;
    o.ref = dir() + "/full";
    o.out = dest;
    o.shard = shard;
    o.layout_name = layout_name;
    o.layout_json = {{"preset", layout_name}};
    o.progress = 0;
    std::ostringstream log;
    auto r = runners::run_cases(*runner, o, log);
    ASSERT_TRUE(r) << r.message();
    ASSERT_EQ(r->error, 0) << log.str();
  };
  run(out("run_full"), {0, 1}, "torch");
  run(out("run_s0"), {0, 2}, "torch");
  run(out("run_s1"), {1, 2}, "torch");

  auto m = cases::merge_sets(out("run_merged"), {out("run_s1"), out("run_s0")});
  ASSERT_TRUE(m) << m.message();
  EXPECT_EQ(m->cases, 8u);
  int tensors = 0;
  for (const auto& e : stdfs::recursive_directory_iterator(out("run_full"))) {
    const std::string rel = stdfs::relative(e.path(), out("run_full")).string();
    if (!e.is_regular_file() || e.path().extension() != ".npy" || rel.rfind("work/", 0) == 0)
      continue;
    ASSERT_TRUE(stdfs::exists(out("run_merged/" + rel))) << rel;
    EXPECT_EQ(slurp(out("run_merged/" + rel)), slurp(e.path().string())) << rel;
    ++tensors;
  }
  EXPECT_GT(tensors, 8 * 4);  // outputs, losses and gradients of both ops of every case
  EXPECT_EQ(json_at(out("run_merged/run_info.json")).at("selection").at("merged_from").size(), 2u);

  auto half = cases::merge_sets(out("run_half"), {out("run_s0")});
  ASSERT_FALSE(half);
  EXPECT_TRUE(contains(half.message(), "incomplete: shard 1/2 missing (1 of 2 given)"))
      << half.message();

  run(out("run_s1_fortran"), {1, 2}, "fortran");
  auto mixed = cases::merge_sets(out("run_mixed"), {out("run_s0"), out("run_s1_fortran")});
  ASSERT_FALSE(mixed);
  EXPECT_TRUE(contains(mixed.message(), out("run_s1_fortran") + "/run_info.json has layout"))
      << mixed.message();
  EXPECT_TRUE(contains(mixed.message(), "shards of different sweeps")) << mixed.message();
}

// The command line: --allow-partial reaches merge_sets, and a refusal is exit 2 with the reason.
struct CliResult {
  int code = -1;
  std::string text;
};
CliResult merge_cli(std::vector<std::string> args) {
  CLI::App app{"validate"};
  int code = -1;
  cli::register_merge(app, code);
  args.insert(args.begin(), {"validate", "merge"});
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
    code = 2;
  }
  CliResult r;
  r.text = ::testing::internal::GetCapturedStdout();
  r.text += ::testing::internal::GetCapturedStderr();
  r.code = code;
  return r;
}

TEST_F(MergeSets, CommandLineAllowPartial) {
  auto refused = merge_cli({out("cli_refused"), shard(0), shard(2)});
  EXPECT_EQ(refused.code, 2) << refused.text;
  EXPECT_TRUE(contains(refused.text, "validate merge: incomplete: shard 1/3 missing"))
      << refused.text;

  auto partial = merge_cli({"--allow-partial", out("cli_partial"), shard(0), shard(2)});
  EXPECT_EQ(partial.code, 0) << partial.text;
  EXPECT_TRUE(contains(partial.text, "validate merge: 2 shards, 5 cases")) << partial.text;
  EXPECT_TRUE(contains(partial.text, "WARNING: partial set, shards 1/3 missing")) << partial.text;

  // A later parse in the same process starts from the defaults again.
  auto again = merge_cli({out("cli_again"), shard(0), shard(2)});
  EXPECT_EQ(again.code, 2) << again.text;
}

}  // namespace
