// Hostile JSON: case files, metadata and manifests written by others. Each must be refused with a
// message naming the file and the problem, and no name in them may lead outside the set.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/temp_dir.hpp"
#include "validate/cases/case_file.hpp"
#include "validate/cases/refset.hpp"
#include "validate/cases/verify.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/json_io.hpp"

using namespace validate;
namespace stdfs = std::filesystem;

namespace {

const std::string kSmoke = std::string(VALIDATE_SOURCE_DIR) + "/references/smoke";

::testing::AssertionResult refused(const Status& st, const std::string& file, const std::string& problem) {
  if (st) return ::testing::AssertionFailure() << "accepted";
  if (st.message().find(file) == std::string::npos)
    return ::testing::AssertionFailure() << "message does not name " << file << ": " << st.message();
  if (st.message().find(problem) == std::string::npos)
    return ::testing::AssertionFailure() << "expected '" << problem << "' in: " << st.message();
  return ::testing::AssertionSuccess();
}
template <class T>
::testing::AssertionResult refused(const Result<T>& r, const std::string& file, const std::string& problem) {
  return refused(r.status(), file, problem);
}

Json parse(const std::string& text) { return Json::parse(text); }

Json smoke_metadata() {
  auto j = read_json(kSmoke + "/float32/k0072_ic008_metadata.json");
  EXPECT_TRUE(j) << j.message();
  return *j;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// read_json: limits and the files it must not read.

TEST(HostileJson, HundredMegabytesAreRefusedBeforeBeingRead) {
  validate::testing::TempDir tmp("hostile_json");
  const std::string path = tmp / "big.json";
  {
    std::ofstream f(path);
    f << "{";
  }
  // Sparse: 100 MB on paper, nothing on disk; a reader that read it whole would take 100 MB.
  ASSERT_EQ(::truncate(path.c_str(), 100 << 20), 0);
  EXPECT_TRUE(refused(read_json(path), path, "larger than the 67108864-byte limit"));
  EXPECT_TRUE(refused(cases::load_case_file(path), path, "larger than the 16777216-byte limit"));
}

TEST(HostileJson, NonRegularFilesAreRefused) {
  // Regression: a FIFO or a symlink to /dev/zero reports size 0 and passed the size check, then was
  // read without end (a manifest.json -> /dev/zero took all memory).
  validate::testing::TempDir tmp("hostile_json");
  const std::string fifo = tmp / "fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_TRUE(refused(read_json(fifo), fifo, "not a regular file"));
  const std::string link = tmp / "zero.json";
  stdfs::create_symlink("/dev/zero", link);
  EXPECT_TRUE(refused(read_json(link), link, "not a regular file"));
  EXPECT_TRUE(refused(read_json(tmp.path()), tmp.path(), "not a regular file"));
}

TEST(HostileJson, NumbersOutOfRangeAreAnErrorNotAnException) {
  // Regression (fuzz_layout): nlohmann reports 1e400 as out_of_range, not parse_error; the exception
  // escaped read_json and terminated every command that read such a file.
  validate::testing::TempDir tmp("hostile_json");
  const std::string path = tmp / "n.json";
  ASSERT_TRUE(fs::write_atomic(path, std::string("{\"seed\": 1e400}")));
  EXPECT_TRUE(refused(read_json(path), path, "invalid JSON"));
  ASSERT_TRUE(fs::write_atomic(path, std::string("{\"a\": \"\xff\"}")));  // invalid UTF-8
  EXPECT_TRUE(refused(read_json(path), path, "invalid JSON"));
}

// ---------------------------------------------------------------------------------------------
// Case files.

TEST(HostileJson, CaseFileThatIsNotAnObjectOrHasWrongTypes) {
  const std::string f = "cases/x.json";
  for (const char* text : {"[]", "null", "42", "\"cases\""})
    EXPECT_TRUE(refused(cases::parse_case_file(parse(text), f), f, "must be a JSON object")) << text;
  const std::pair<const char*, const char*> bad[] = {
      {R"({"seed": -1, "sweep": {"in_channels": [8]}})", "'seed' must be a non-negative integer"},
      {R"({"seed": "42", "sweep": {"in_channels": [8]}})", "'seed' must be a non-negative integer"},
      {R"({"dtypes": "float32", "sweep": {"in_channels": [8]}})", "'dtypes' must be a list of names"},
      {R"({"dtypes": ["float64"], "sweep": {"in_channels": [8]}})", "unknown dtype 'float64'"},
      {R"({"sweep": {"in_channels": [8.5]}})", "sweep in_channels must be integers"},
      {R"({"sweep": [8]})", "'sweep' must be"},
      {R"({"cases": {"name": "a"}})", "'cases' must be a list"},
      {R"({"cases": [[]]})", "expected an object"},
      {R"({"cases": [{"batch": "2"}]})", "'batch' must be an integer"},
      {R"({"cases": [{"batch": 2.0}]})", "'batch' must be an integer"},
      {R"({"cases": [{"kernel": [3, 3, 3]}]})", "'kernel' must be an integer or a pair"},
      {R"({"cases": [{"bias": 1}]})", "'bias' must be true or false"},
      {R"({"cases": [{"name": 7}]})", "'name' must be a string"},
      {R"({"cases": [{"colour": "red"}]})", "unknown key 'colour'"},
      {R"({"format": "validate-cases/2", "cases": [{}]})", "format must be"},
      {R"({"loss": "l1", "cases": [{}]})", "only \"mse\" loss"},
      {R"({})", "no cases"},
  };
  for (const auto& [text, problem] : bad) EXPECT_TRUE(refused(cases::parse_case_file(parse(text), f), f, problem)) << text;
}

TEST(HostileJson, CaseFileGeometryThatWouldDivideByZeroOrOverflow) {
  const std::string f = "cases/x.json";
  const std::pair<const char*, const char*> bad[] = {
      // Regression (fuzz_case_file): the sweep named its case, computing K = C/groups*KH*KW, before
      // checking groups: SIGFPE.
      {R"({"defaults": {"groups": 0}, "sweep": {"in_channels": [8]}})", "groups=0 must divide"},
      {R"({"cases": [{"groups": 0}]})", "groups=0 must divide"},
      {R"({"cases": [{"stride": 0}]})", "stride and dilation must be >= 1"},
      {R"({"cases": [{"dilation": [1, -1]}]})", "stride and dilation must be >= 1"},
      {R"({"cases": [{"padding": -1}]})", "padding must be >= 0"},
      {R"({"cases": [{"height": 0}]})", "must be >= 1"},
      {R"({"cases": [{"height": 1, "width": 1, "padding": 0}]})", "the kernel does not fit"},
      // Overflows int64 in hout() or in a shape product without the bounds.
      {R"({"cases": [{"padding": 4611686018427387904}]})", "too large"},
      {R"({"cases": [{"kernel": 1, "padding": 0, "dilation": 9223372036854775807}]})", "too large"},
      {R"({"cases": [{"batch": 2147483647, "in_channels": 2147483647}]})", "more than 2^36 elements"},
      {R"({"cases": [{"in_channels": 65536, "kernel": [65536, 65536], "height": 65536, "width": 65536}]})",
       "more than 2^36 elements"},
      {R"({"cases": [{"batch": 18446744073709551615}]})", "must be >= 1"},
  };
  for (const auto& [text, problem] : bad) EXPECT_TRUE(refused(cases::parse_case_file(parse(text), f), f, problem)) << text;
}

TEST(HostileJson, CaseNamesCannotBePaths) {
  const std::string f = "cases/x.json";
  for (const char* name : {"../escape", "/etc/passwd", "a/b", "..", ".hidden", "", "a\\b"}) {
    Json j = {{"cases", {{{"name", name}}}}};
    EXPECT_TRUE(refused(cases::parse_case_file(j, f), f, "no paths")) << name;
  }
  Json nul = {{"cases", {{{"name", std::string("ok\0/../x", 8)}}}}};
  EXPECT_TRUE(refused(cases::parse_case_file(nul, f), f, "no paths"));
  Json longname = {{"cases", {{{"name", std::string(101, 'a')}}}}};
  EXPECT_TRUE(refused(cases::parse_case_file(longname, f), f, "no paths"));
}

// ---------------------------------------------------------------------------------------------
// Metadata (`<case>_metadata.json`).

TEST(HostileJson, MetadataThatIsNotAnObjectOrHasWrongTypes) {
  const std::string f = "set/float32/x_metadata.json";
  for (const char* text : {"[]", "null", "\"x\""})
    EXPECT_TRUE(refused(cases::case_from_metadata(parse(text), f), f, "must be a JSON object")) << text;
  auto with = [](const char* pointer, Json value) {
    Json m = smoke_metadata();
    m[Json::json_pointer(pointer)] = std::move(value);
    return m;
  };
  EXPECT_TRUE(cases::case_from_metadata(smoke_metadata(), f)) << "the untouched metadata must load";
  const std::pair<Json, const char*> bad[] = {
      {with("/format", 1), "malformed metadata"},
      {with("/format", "validate-reference/2"), "format is not"},
      {with("/case", 5), "malformed metadata"},
      {with("/dtype", "int8"), "unknown dtype 'int8'"},
      {with("/ops", Json::array()), "\"ops\" must be an object"},
      {with("/ops/conv2d/params/groups", "1"), "groups must be an integer"},
      {with("/ops/conv2d/params/stride", Json::array({1})), "stride must be a list of 2 integers"},
      {with("/ops/conv2d/params/bias", 1), "malformed metadata"},
      // Regression (fuzz_metadata): a float dimension went through nlohmann's plain cast to int64,
      // undefined for 1e300 (UBSan).
      {with("/ops/conv2d/tensors/input/shape", Json::array({1, 8, 32, 1e300})), "must hold integers"},
      {with("/ops/conv2d/tensors/input/shape", Json::array({1, 8, 32})), "must be 4-D"},
      {with("/ops/conv2d/tensors/weight/shape", Json::array({32, 9, 3, 3})), "weight shape does not match"},
      {with("/ops/matmul/params/M", 1.5), "M must be an integer"},
      // Regression (fuzz_metadata): negative or zero matmul sizes were accepted.
      {with("/ops/matmul/params/M", -5), "must be >= 1"},
  };
  for (const auto& [meta, problem] : bad) EXPECT_TRUE(refused(cases::case_from_metadata(meta, f), f, problem)) << problem;
}

TEST(HostileJson, MetadataGeometryThatWouldDivideByZeroOrOverflow) {
  // Regression (fuzz_metadata): stride 0 reached hout() through Case::tensors() in verify/list/run:
  // SIGFPE. Huge padding overflowed int64 there.
  const std::string f = "set/float32/x_metadata.json";
  auto with = [](const char* pointer, Json value) {
    Json m = smoke_metadata();
    m[Json::json_pointer(pointer)] = std::move(value);
    return m;
  };
  EXPECT_TRUE(refused(cases::case_from_metadata(with("/ops/conv2d/params/stride", Json::array({0, 1})), f), f,
                      "stride and dilation must be >= 1"));
  EXPECT_TRUE(refused(cases::case_from_metadata(with("/ops/conv2d/params/groups", 0), f), f, "groups=0"));
  EXPECT_TRUE(refused(cases::case_from_metadata(
                          with("/ops/conv2d/params/padding", Json::array({4611686018427387904LL, 1})), f),
                      f, "too large"));
  EXPECT_TRUE(refused(cases::case_from_metadata(
                          with("/ops/conv2d/tensors/input/shape", Json::array({1, 8, -32, 32})), f),
                      f, "must be >= 1"));
  EXPECT_TRUE(refused(cases::case_from_metadata(with("/ops/matmul/params/K", 1LL << 40), f), f, "K, N < 2^31"));
}

TEST(HostileJson, MetadataCaseNameCannotLeaveTheSet) {
  // Regression: the case name becomes "<case>_<op>_<tensor>.npy" under <set>/<dtype>; "../../x"
  // made verify and run read files outside the set.
  const std::string f = "set/float32/x_metadata.json";
  for (const char* name : {"../../outside", "/abs/path", "a/b", ""}) {
    Json m = smoke_metadata();
    m["case"] = name;
    EXPECT_TRUE(refused(cases::case_from_metadata(m, f), f, "no paths")) << name;
  }
}

// ---------------------------------------------------------------------------------------------
// Manifests.

TEST(HostileJson, ManifestThatIsNotAnObjectOrHasWrongTypes) {
  const std::string f = "set/manifest.json";
  const std::pair<const char*, const char*> bad[] = {
      {"[]", "no \"files\" object"},
      {"{}", "no \"files\" object"},
      {R"({"files": []})", "no \"files\" object"},
      {R"({"format": 1, "files": {}})", "\"format\" is not a string"},
      {R"({"files": {"a.npy": "deadbeef"}})", "entry 'a.npy' has no sha256 string"},
      {R"({"files": {"a.npy": {"size": 4}}})", "entry 'a.npy' has no sha256 string"},
      {R"({"files": {"a.npy": {"sha256": 7}}})", "entry 'a.npy' has no sha256 string"},
      // Regression: `validate list` and merge called value("size", 0) on these and threw.
      {R"({"files": {"a.npy": {"sha256": "00", "size": "4"}}})", "\"size\" is not a non-negative integer"},
      {R"({"files": {"a.npy": {"sha256": "00", "size": -4}}})", "\"size\" is not a non-negative integer"},
      {R"({"files": {"a.npy": {"sha256": "00", "size": 4.5}}})", "\"size\" is not a non-negative integer"},
  };
  for (const auto& [text, problem] : bad) EXPECT_TRUE(refused(cases::check_manifest(parse(text), f), f, problem)) << text;
  // An empty list proves nothing (it verified as "0 files checked").
  EXPECT_TRUE(refused(cases::check_manifest(parse(R"({"format": "validate-reference/1", "files": {}})"), f), f,
                      "lists nothing"));
  EXPECT_TRUE(cases::check_manifest(
      parse(R"({"format": "validate-reference/1", "files": {"config.json": {"sha256": "00", "size": 2}}})"), f));
}

TEST(HostileJson, ManifestNamesCannotLeaveTheSet) {
  const std::string f = "set/manifest.json";
  const std::pair<std::string, const char*> bad[] = {
      {"../outside.npy", "leaves the directory"},
      {"float32/../../outside.npy", "leaves the directory"},
      {"float32/./../..", "leaves the directory"},
      {"/etc/passwd", "absolute path"},
      {std::string("float32/a\0/../../x", 18), "NUL"},
      {"", "empty file name"},
  };
  for (const auto& [name, problem] : bad) {
    Json m = {{"files", {{name, {{"sha256", "00"}, {"size", 0}}}}}};
    EXPECT_TRUE(refused(cases::check_manifest(m, f), f, problem)) << name;
  }
}

TEST(HostileJson, VerifyRefusesAHostileManifestBeforeTouchingAnyFile) {
  validate::testing::TempDir tmp("hostile_json");
  const std::string set = tmp / "set";
  stdfs::copy(kSmoke, set, stdfs::copy_options::recursive);
  // A file outside the set that a traversal would hash.
  ASSERT_TRUE(fs::write_atomic(tmp / "secret.txt", std::string("secret")));
  auto manifest = read_json(set + "/manifest.json");
  ASSERT_TRUE(manifest);
  (*manifest)["files"]["../secret.txt"] = {{"size", 6}, {"sha256", "00"}};
  ASSERT_TRUE(write_json(set + "/manifest.json", *manifest));
  auto rep = cases::verify_set(set);
  EXPECT_TRUE(refused(rep, set + "/manifest.json", "'../secret.txt' leaves the directory"));
}
