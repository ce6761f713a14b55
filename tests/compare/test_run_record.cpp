// The run record (<dtype>/<case>_run.json): one typed reader and writer for `run` and `compare`.
// The JSON must not change from 0.1 (outside tools read it), so a record written by 0.1 — the
// text below has the keys the exec and cuDNN runners wrote — must come back byte for byte.
#include <gtest/gtest.h>

#include "validate/cases/run_record.hpp"

namespace validate {
namespace {

const char* const kRecord = R"({
  "case": "odd_n3_c5_h11_w6",
  "dtype": "float32",
  "ops": {
    "conv2d": {
      "elapsed_s": 0.25,
      "info": {
        "activation_path": "strided",
        "algorithms": {"fwd": {"algo": "IMPLICIT_GEMM"}},
        "bitwise_deterministic": false,
        "filter_path": "converted",
        "nondeterministic_tensors": ["grad_weight"],
        "time_ms": {"fwd": 0.5}
      },
      "input_hashes": {"input": "aa", "weight": "bb"},
      "layouts": {"input": "NHWC", "weight": "HWIO"},
      "message": "",
      "outcome": "ok",
      "produced": ["output", "loss", "grad_weight"]
    },
    "matmul": {
      "elapsed_s": 1.5,
      "info": {"command": "prog {dir}", "exit_status": 3, "not_requested": []},
      "input_hashes": {},
      "message": "the program exited with status 3",
      "outcome": "error",
      "produced": []
    }
  }
})";

TEST(RunRecord, A01RecordComesBackByteForByte) {
  const Json in = Json::parse(kRecord);
  auto rec = cases::case_record_from_json(in, "r.json");
  ASSERT_TRUE(rec.is_ok()) << rec.message();
  EXPECT_EQ(cases::to_json(*rec).dump(2), in.dump(2));
}

TEST(RunRecord, NotesAreFieldsNotKeysFoundBySuffix) {
  auto rec = cases::case_record_from_json(Json::parse(kRecord), "r.json");
  ASSERT_TRUE(rec.is_ok()) << rec.message();
  const auto& conv = rec->ops.at(cases::Op::conv2d);
  EXPECT_EQ(conv.outcome, cases::Outcome::ok);
  EXPECT_EQ(conv.notes.paths.at("activation"), "strided");
  EXPECT_EQ(conv.notes.paths.at("filter"), "converted");
  ASSERT_TRUE(conv.notes.bitwise_deterministic.has_value());
  EXPECT_FALSE(*conv.notes.bitwise_deterministic);
  EXPECT_EQ(conv.notes.nondeterministic_tensors, std::vector<std::string>{"grad_weight"});
  EXPECT_FALSE(conv.notes.not_requested.has_value());  // the runner asked for everything
  EXPECT_FALSE(conv.notes.extra.contains("activation_path"));
  EXPECT_TRUE(conv.notes.extra.contains("algorithms"));
  ASSERT_TRUE(conv.layouts.has_value());
  EXPECT_EQ(conv.layouts->at("weight"), "HWIO");
  const auto& mm = rec->ops.at(cases::Op::matmul);
  EXPECT_EQ(mm.outcome, cases::Outcome::error);
  EXPECT_EQ(mm.message, "the program exited with status 3");  // no "error: " prefix to parse
  ASSERT_TRUE(mm.notes.not_requested.has_value());
  EXPECT_TRUE(mm.notes.not_requested->empty());
  ASSERT_TRUE(mm.input_hashes.has_value());
  EXPECT_FALSE(mm.layouts.has_value());
}

TEST(RunRecord, MalformedRecordsAreNamedErrors) {
  struct Bad {
    const char* json;
    const char* says;
  };
  const Bad bad[] = {
      {R"([1])", "r.json: not a JSON object"},
      {R"({"case": "x"})", "r.json: missing \"ops\" object"},
      {R"({"ops": {"conv3d": {"outcome": "ok", "produced": []}}})", "ops.conv3d: \"conv3d\" is not an op"},
      {R"({"ops": {"matmul": {"outcome": "passed", "produced": []}}})", "outcome \"passed\" is not one of"},
      {R"({"ops": {"matmul": {"outcome": "ok"}}})", "outcome ok but no \"produced\" list"},
      {R"({"ops": {"matmul": {"outcome": "ok", "produced": [3]}}})", "produced holds a non-string"},
  };
  for (const auto& b : bad) {
    auto rec = cases::case_record_from_json(Json::parse(b.json), "r.json");
    ASSERT_FALSE(rec.is_ok()) << b.json;
    EXPECT_NE(rec.message().find(b.says), std::string::npos) << rec.message();
    EXPECT_EQ(rec.message().rfind("r.json", 0), 0u) << rec.message();
  }
}

TEST(RunRecord, OutcomeNamesRoundTrip) {
  for (auto o : {cases::Outcome::ok, cases::Outcome::error, cases::Outcome::skipped, cases::Outcome::unsupported})
    EXPECT_EQ(cases::outcome_from_name(cases::outcome_name(o)), o);
  EXPECT_FALSE(cases::outcome_from_name("error: boom").has_value());
}

}  // namespace
}  // namespace validate
