// Refusals: verify catches a flipped byte, a missing file and a missing manifest; a case file with
// a bad geometry is refused naming the case.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "common/temp_dir.hpp"
#include "generate/generate_fixture.hpp"
#include "validate/cases/case_file.hpp"
#include "validate/cases/verify.hpp"
#include "validate/core/json_io.hpp"
#include "validate/generate/generate.hpp"

using namespace validate;
namespace stdfs = std::filesystem;
using validate::testing::write_case_file;
using validate::testing::options;

TEST(Verify, CatchesAFlippedByteAMissingFileAndNoManifest) {
  validate::testing::TempDir tmp("verify");
  const std::string dir = tmp.path();
  std::string cf = write_case_file(dir);
  std::ostringstream log;
  auto o = options(cf, dir + "/ref");
  o.only = "^float32/k0018";
  ASSERT_TRUE(generate::generate(o, log));
  std::string victim = dir + "/ref/float32/k0018_ic002_conv2d_weight.npy";
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    char ch;
    f.read(&ch, 1);
    f.seekp(200);
    ch ^= 1;
    f.write(&ch, 1);
  }
  auto rep = cases::verify_set(dir + "/ref");
  ASSERT_TRUE(rep) << rep.message();
  ASSERT_EQ(rep->mismatches.size(), 2u);  // the file hash and the input's value hash
  EXPECT_NE(rep->mismatches[0].find("k0018_ic002_conv2d_weight.npy"), std::string::npos);
  stdfs::remove(dir + "/ref/float32/k0018_ic002_matmul_output.npy");
  rep = cases::verify_set(dir + "/ref");
  ASSERT_TRUE(rep);
  bool missing = false;
  for (auto& m : rep->mismatches) missing |= m.find("matmul_output.npy: missing") != std::string::npos;
  EXPECT_TRUE(missing);
  stdfs::remove(dir + "/ref/manifest.json");
  auto none = cases::verify_set(dir + "/ref");
  ASSERT_FALSE(none);
  EXPECT_NE(none.message().find("incomplete"), std::string::npos);
}

TEST(CaseFile, RejectsBadGeometryNamingTheCase) {
  auto bad = cases::parse_case_file(Json::parse(R"({"sweep": {"in_channels": [3]}, "defaults": {"groups": 2}})"), "x.json");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("groups=2"), std::string::npos) << bad.message();
  auto unknown = cases::parse_case_file(Json::parse(R"({"sweep": {"in_channels": [3]}, "defaults": {"kernal": 3}})"), "x.json");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.message().find("kernal"), std::string::npos);
  auto path = cases::parse_case_file(Json::parse(R"({"cases": [{"name": "../evil"}]})"), "x.json");
  ASSERT_FALSE(path);
  auto ok = cases::load_case_file(std::string(VALIDATE_SOURCE_DIR) + "/cases/default.json");
  ASSERT_TRUE(ok) << ok.message();
  ASSERT_EQ(ok->cases.size(), 15u);
  EXPECT_EQ(ok->cases.front().name, "k0072_ic008");
  EXPECT_EQ(ok->cases.back().name, "k73728_ic8192");
  EXPECT_EQ(ok->cases.back().params<cases::MatmulParams>().m, 1024);
}
