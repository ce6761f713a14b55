// The cuDNN runner's algorithm selection and NCHW fallback decisions (algo_select.hpp), driven by a
// fake algorithm table and a fake "execute" that says which algorithms cuDNN refuses when run:
// no device needed, so these run on every machine. The trap: the _v7 heuristics list
// algorithms that then return CUDNN_STATUS_NOT_SUPPORTED when executed; each such candidate must
// be tried once and skipped, never reported as an `error` that fails compare.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "algo_select.hpp"
#include "validate/cases/algorithm.hpp"

namespace validate::runners::cudnn_detail {
namespace {

// fwd: 0 IMPLICIT_GEMM, 1 IMPLICIT_PRECOMP_GEMM, 4 FFT, 6 WINOGRAD, 7 WINOGRAD_NONFUSED
// bwd_data: 0 ALGO_0, 1 ALGO_1, 4 WINOGRAD; bwd_filter: 0 ALGO_0, 1 ALGO_1, 3 ALGO_3.
Choice cand(int algo, std::size_t ws = 0) {
  Choice c;
  c.algo = algo;
  c.workspace = ws;
  return c;
}

AlgoTable table(std::vector<int> fwd, std::vector<int> bd, std::vector<int> bf) {
  AlgoTable t;
  for (int a : fwd) t.cand[0].push_back(cand(a));
  for (int a : bd) t.cand[1].push_back(cand(a));
  for (int a : bf) t.cand[2].push_back(cand(a));
  return t;
}

// A fake cuDNN: `refuse[d]` are the algorithms whose execution is "not supported"; `fail[d]` fail
// with another error. Execution order is cuDNN's: fwd, then bwd_data, then bwd_filter, and the
// first failing call ends the run. Records every combo executed.
struct FakeCudnn {
  std::set<int> refuse[3], fail[3];
  std::vector<std::string> executed;
  Attempt operator()(const Combo& c) {
    executed.push_back(c.label());
    for (int i = 0; i < 3; ++i) {
      if (refuse[i].count(c.c[i].algo))
        return {Attempt::unsupported, kDirections[i], "CUDNN_STATUS_NOT_SUPPORTED"};
      if (fail[i].count(c.c[i].algo))
        return {Attempt::error, kDirections[i], "CUDNN_STATUS_EXECUTION_FAILED"};
    }
    return {};
  }
};

struct Req {
  AlgoRequest r[3];
};
Req automatic() { return {}; }
Req all_dirs() {
  Req q;
  for (auto& r : q.r) r.kind = AlgoRequest::all;
  return q;
}

Selection run(const AlgoTable& t, const Req& q, FakeCudnn& fake) {
  return select_algorithms(t, q.r, [&](const Combo& c) { return fake(c); });
}

TEST(CudnnAlgoSelect, HeuristicFirstWhenItRuns) {
  FakeCudnn fake;
  auto s = run(table({6, 1}, {1, 0}, {1, 0}), automatic(), fake);
  ASSERT_EQ(s.outcome, Attempt::ok);
  ASSERT_EQ(s.results.size(), 1u);
  EXPECT_EQ(s.results[0].combo.label(), "fwd=WINOGRAD,bwd_data=ALGO_1,bwd_filter=ALGO_1");
  EXPECT_EQ(s.results[0].variant, "");
  EXPECT_EQ(s.results[0].attempt_index, 0);
  EXPECT_EQ(s.results[0].combo.c[0].selected_by, "heuristic");
  EXPECT_EQ(fake.executed.size(), 1u);
}

// The first prediction: a listed forward algorithm whose execution is NOT_SUPPORTED must
// be skipped for the next one, and the case must end ok (the old runner reported `error`).
TEST(CudnnAlgoSelect, ListedButNotSupportedIsSkippedNotAnError) {
  FakeCudnn fake;
  fake.refuse[0] = {7};  // WINOGRAD_NONFUSED listed first, refused when run
  fake.refuse[2] = {1};  // bwd_filter ALGO_1 likewise
  auto s = run(table({7, 1, 0}, {1}, {1, 0, 3}), automatic(), fake);
  ASSERT_EQ(s.outcome, Attempt::ok) << s.message;
  ASSERT_EQ(s.results.size(), 1u);
  EXPECT_EQ(s.results[0].combo.label(),
            "fwd=IMPLICIT_PRECOMP_GEMM,bwd_data=ALGO_1,bwd_filter=ALGO_0");
  EXPECT_EQ(s.results[0].attempt.kind, Attempt::ok);
  // Each refused candidate was executed exactly once: 3 executions in all.
  EXPECT_EQ(fake.executed, (std::vector<std::string>{
                               "fwd=WINOGRAD_NONFUSED,bwd_data=ALGO_1,bwd_filter=ALGO_1",
                               "fwd=IMPLICIT_PRECOMP_GEMM,bwd_data=ALGO_1,bwd_filter=ALGO_1",
                               "fwd=IMPLICIT_PRECOMP_GEMM,bwd_data=ALGO_1,bwd_filter=ALGO_0"}));
  EXPECT_EQ(s.results[0].attempt_index, 2);
  EXPECT_EQ(s.dropped[0], "WINOGRAD_NONFUSED: CUDNN_STATUS_NOT_SUPPORTED");
  EXPECT_EQ(s.dropped[1], "");
  EXPECT_EQ(s.dropped[2], "ALGO_1: CUDNN_STATUS_NOT_SUPPORTED");
}

TEST(CudnnAlgoSelect, EveryCandidateRefusedIsUnsupportedNamingThem) {
  FakeCudnn fake;
  fake.refuse[1] = {1, 0};
  auto s = run(table({1}, {1, 0}, {0}), automatic(), fake);
  EXPECT_EQ(s.outcome, Attempt::unsupported);
  EXPECT_TRUE(s.results.empty());
  EXPECT_NE(s.message.find("no bwd_data algorithm"), std::string::npos) << s.message;
  EXPECT_NE(
      s.message.find("ALGO_1: CUDNN_STATUS_NOT_SUPPORTED; ALGO_0: CUDNN_STATUS_NOT_SUPPORTED"),
      std::string::npos)
      << s.message;
  EXPECT_EQ(fake.executed.size(), 2u);
}

TEST(CudnnAlgoSelect, AnErrorIsNotSkipped) {
  FakeCudnn fake;
  fake.fail[0] = {1};
  auto s = run(table({1, 0}, {0}, {0}), automatic(), fake);
  EXPECT_EQ(s.outcome, Attempt::error);
  ASSERT_EQ(s.results.size(), 1u);
  EXPECT_EQ(s.results[0].attempt.kind, Attempt::error);
  EXPECT_EQ(s.message, "CUDNN_STATUS_EXECUTION_FAILED");
  EXPECT_EQ(fake.executed.size(), 1u);  // IMPLICIT_GEMM was not tried in its place
}

TEST(CudnnAlgoSelect, NamedAlgorithmRefusedWhenRunIsUnsupported) {
  FakeCudnn fake;
  fake.refuse[0] = {4};
  Req q;
  q.r[0] = {AlgoRequest::named, 4};
  auto s = run(table({1, 4}, {0}, {0}), q, fake);
  EXPECT_EQ(s.outcome, Attempt::unsupported);
  EXPECT_NE(s.message.find("fwd algorithm FFT is listed by cuDNN's heuristics"), std::string::npos)
      << s.message;
  EXPECT_EQ(fake.executed.size(), 1u);  // no silent substitute for a named algorithm

  FakeCudnn fine;
  auto ok = run(table({1, 4}, {0}, {0}), q, fine);
  ASSERT_EQ(ok.outcome, Attempt::ok);
  EXPECT_EQ(ok.results[0].combo.c[0].algo, 4);
  EXPECT_EQ(ok.results[0].combo.c[0].selected_by, "named");
}

TEST(CudnnAlgoSelect, NamedNotListedAndEmptyDirectionAreUnsupportedWithoutRunning) {
  FakeCudnn fake;
  Req q;
  q.r[2] = {AlgoRequest::named, 3};
  auto s = run(table({1}, {0}, {0, 1}), q, fake);
  EXPECT_EQ(s.outcome, Attempt::unsupported);
  EXPECT_EQ(
      s.message,
      "bwd_filter algorithm ALGO_3 is not supported for this case (cuDNN offers ALGO_0, ALGO_1)");
  AlgoTable t = table({1}, {}, {0});
  t.rejected[1] = "ALGO_1: needs 9000 MiB of workspace (limit 4096 MiB)";
  auto e = run(t, automatic(), fake);
  EXPECT_EQ(e.outcome, Attempt::unsupported);
  EXPECT_EQ(e.message,
            "cuDNN offers no bwd_data algorithm for this case (ALGO_1: needs 9000 MiB of "
            "workspace (limit 4096 MiB))");
  EXPECT_TRUE(fake.executed.empty());
}

// --algo all: the baseline, then one direction varied at a time; a variant refused when run is
// reported `unsupported` under its label; one found refused while choosing the baseline is not
// executed again.
TEST(CudnnAlgoSelect, AllVariesOneDirectionAtATimeAndMarksRefusedVariants) {
  FakeCudnn fake;
  fake.refuse[0] = {7, 4};  // WINOGRAD_NONFUSED (first, refused during the baseline), FFT
  auto s = run(table({7, 1, 4, 0}, {1, 0}, {1, 3}), all_dirs(), fake);
  ASSERT_EQ(s.outcome, Attempt::ok) << s.message;
  std::vector<std::pair<std::string, Attempt::Kind>> got;
  for (const auto& p : s.results) {
    EXPECT_EQ(p.variant, p.combo.label());
    got.emplace_back(p.variant, p.attempt.kind);
  }
  const std::vector<std::pair<std::string, Attempt::Kind>> want{
      {"fwd=IMPLICIT_PRECOMP_GEMM,bwd_data=ALGO_1,bwd_filter=ALGO_1", Attempt::ok},  // baseline
      {"fwd=WINOGRAD_NONFUSED,bwd_data=ALGO_1,bwd_filter=ALGO_1", Attempt::unsupported},
      {"fwd=FFT,bwd_data=ALGO_1,bwd_filter=ALGO_1", Attempt::unsupported},
      {"fwd=IMPLICIT_GEMM,bwd_data=ALGO_1,bwd_filter=ALGO_1", Attempt::ok},
      {"fwd=IMPLICIT_PRECOMP_GEMM,bwd_data=ALGO_0,bwd_filter=ALGO_1", Attempt::ok},
      {"fwd=IMPLICIT_PRECOMP_GEMM,bwd_data=ALGO_1,bwd_filter=ALGO_3", Attempt::ok},
  };
  EXPECT_EQ(got, want);
  EXPECT_EQ(s.results[1].attempt_index, -1);  // not executed again
  EXPECT_EQ(s.results[1].attempt.direction, Direction::fwd);
  EXPECT_EQ(s.results[2].attempt.direction, Direction::fwd);
  // 1 refused baseline try + baseline + FFT + IMPLICIT_GEMM + 2 backward variants.
  EXPECT_EQ(fake.executed.size(), 6u);
  for (std::size_t k = 0; k < s.results.size(); ++k) {
    if (s.results[k].attempt_index >= 0) {
      EXPECT_EQ(fake.executed[static_cast<std::size_t>(s.results[k].attempt_index)],
                s.results[k].variant);
    }
  }
  EXPECT_EQ(s.results[3].combo.c[0].selected_by, "all");
}

TEST(CudnnAlgoSelect, AppliedMathKeepsTheRequestAndFollowsTheHeuristic) {
  using M = MathType;
  // --math fma (float32 default): FMA whatever the heuristic reports: no TF32 slips in.
  EXPECT_EQ(applied_math(M::fma, M::tensor_op, true), M::fma);
  EXPECT_EQ(applied_math(M::fma, M::default_math, true), M::fma);
  // tf32 / default / 16-bit: the heuristic's per-algorithm math, as PyTorch applies it.
  EXPECT_EQ(applied_math(M::tensor_op, M::fma, true), M::fma);
  EXPECT_EQ(applied_math(M::tensor_op, M::tensor_op, true), M::tensor_op);
  EXPECT_EQ(applied_math(M::default_math, M::tensor_op, true), M::tensor_op);
  EXPECT_EQ(applied_math(M::tensor_op, M::fma, false), M::fma);
  // float32 never down-converts to float16.
  EXPECT_EQ(applied_math(M::tensor_op, M::tensor_op_allow_conversion, true), M::tensor_op);
  EXPECT_EQ(applied_math(M::tensor_op, M::tensor_op_allow_conversion, false),
            M::tensor_op_allow_conversion);
  EXPECT_STREQ(math_type_name(M::fma), "CUDNN_FMA_MATH");
}

TEST(CudnnAlgoSelect, StatusClasses) {
  EXPECT_FALSE(cudnn_status_is_not_supported(0));
  EXPECT_TRUE(cudnn_status_is_not_supported(3000));  // CUDNN_STATUS_NOT_SUPPORTED
  EXPECT_TRUE(cudnn_status_is_not_supported(3002));  // ..._SHAPE
  EXPECT_TRUE(cudnn_status_is_not_supported(3004));  // ..._LAYOUT
  EXPECT_TRUE(cudnn_status_is_not_supported(3010));  // ..._SHARED_MEMORY_INSUFFICIENT
  for (int installation : {3005, 3006, 3007, 3008, 3009})
    EXPECT_FALSE(cudnn_status_is_not_supported(installation)) << installation;
  EXPECT_FALSE(cudnn_status_is_not_supported(2000));  // BAD_PARAM: an error for a convolution
  EXPECT_FALSE(cudnn_status_is_not_supported(4000));
  EXPECT_FALSE(cudnn_status_is_not_supported(5000));
  EXPECT_TRUE(cudnn_status_rejects_call(2000));  // ...but the legacy bias calls fall back on it
  EXPECT_TRUE(cudnn_status_rejects_call(3003));
  EXPECT_FALSE(cudnn_status_rejects_call(5000));
  EXPECT_FALSE(cudnn_status_rejects_call(3007));
}

// setup's decision, with a fake build: the old runner returned from a failed build(false) instead
// of taking the fallback.
struct FakeBuild {
  std::map<bool, Status> result;  // convert -> status
  std::map<bool, bool> feasible_after;
  bool last_convert = false, nchw = false;
  std::vector<bool> calls;
  Result<std::string> choose() {
    return choose_layouts(
        [&](bool convert) {
          calls.push_back(convert);
          last_convert = convert;
          return result.count(convert) ? result[convert] : Status::ok();
        },
        [&](std::string* why) {
          *why = "no fwd algorithm";
          return feasible_after.count(last_convert) ? feasible_after[last_convert] : true;
        },
        [&] { return nchw; });
  }
};

TEST(CudnnLayoutFallback, AsGivenWhenItBuildsAndIsFeasible) {
  FakeBuild f;
  auto r = f.choose();
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(*r, "");
  EXPECT_EQ(f.calls, std::vector<bool>{false});
}

TEST(CudnnLayoutFallback, FailedBuildTakesTheFallback) {
  FakeBuild f;
  f.result[false] = Error{"cudnnSetTensor4dDescriptorEx(…) failed: CUDNN_STATUS_BAD_PARAM"};
  auto r = f.choose();
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(*r,
            "cuDNN refused the layouts as given (cudnnSetTensor4dDescriptorEx(…) failed: "
            "CUDNN_STATUS_BAD_PARAM); every tensor not already NCHW/OIHW is converted to it on "
            "the device");
  EXPECT_EQ(f.calls, (std::vector<bool>{false, true}));
}

TEST(CudnnLayoutFallback, InfeasibleTakesTheFallback) {
  FakeBuild f;
  f.feasible_after[false] = false;
  auto r = f.choose();
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r->rfind("cuDNN offered no algorithm for the layouts as given (no fwd algorithm)", 0),
            0u)
      << *r;
  EXPECT_EQ(f.calls, (std::vector<bool>{false, true}));
}

TEST(CudnnLayoutFallback, ErrorsOnlyWhenThereIsNoFallbackOrItFailsToo) {
  FakeBuild nchw;
  nchw.nchw = true;
  nchw.result[false] = Error{"cudnnGetConvolutionForwardAlgorithm_v7(…) failed: X"};
  auto r = nchw.choose();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.message(), "cudnnGetConvolutionForwardAlgorithm_v7(…) failed: X");
  EXPECT_EQ(nchw.calls, std::vector<bool>{false});

  FakeBuild infeasible_nchw;  // nothing to convert: no fallback, selection reports unsupported
  infeasible_nchw.nchw = true;
  infeasible_nchw.feasible_after[false] = false;
  auto u = infeasible_nchw.choose();
  ASSERT_TRUE(u);
  EXPECT_EQ(*u, "");

  FakeBuild both;
  both.result[false] = Error{"A"};
  both.result[true] = Error{"B"};
  auto b = both.choose();
  ASSERT_FALSE(b);
  EXPECT_EQ(b.message(), "cuDNN refused the layouts as given (A); the NCHW fallback failed too: B");
}

}  // namespace
}  // namespace validate::runners::cudnn_detail

namespace validate::runners::cudnn_detail {
namespace {

// Every enum value of cudnn_ops.h, written out by hand from the header (not from algo_name), with
// the family the error bounds model for it.
TEST(CudnnAlgorithmNames, EveryEnumValueMapsToItsFamilyAndTensor) {
  struct Row {
    Direction d;
    int algo;
    const char* family;
    const char* cudnn;
  };
  const Row rows[] = {
      {Direction::fwd, 0, "direct", "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM"},
      {Direction::fwd, 1, "direct", "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM"},
      {Direction::fwd, 2, "direct", "CUDNN_CONVOLUTION_FWD_ALGO_GEMM"},
      {Direction::fwd, 3, "direct", "CUDNN_CONVOLUTION_FWD_ALGO_DIRECT"},
      {Direction::fwd, 4, "fft", "CUDNN_CONVOLUTION_FWD_ALGO_FFT"},
      {Direction::fwd, 5, "fft_tiling", "CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING"},
      {Direction::fwd, 6, "winograd", "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD"},
      {Direction::fwd, 7, "winograd", "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED"},
      {Direction::bwd_data, 0, "direct", "CUDNN_CONVOLUTION_BWD_DATA_ALGO_0"},
      {Direction::bwd_data, 1, "direct", "CUDNN_CONVOLUTION_BWD_DATA_ALGO_1"},
      {Direction::bwd_data, 2, "fft", "CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT"},
      {Direction::bwd_data, 3, "fft_tiling", "CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING"},
      {Direction::bwd_data, 4, "winograd", "CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD"},
      {Direction::bwd_data, 5, "winograd", "CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED"},
      {Direction::bwd_filter, 0, "direct", "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0"},
      {Direction::bwd_filter, 1, "direct", "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1"},
      {Direction::bwd_filter, 2, "fft", "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT"},
      {Direction::bwd_filter, 3, "direct", "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3"},
      {Direction::bwd_filter, 4, "winograd", "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD"},
      {Direction::bwd_filter, 5, "winograd", "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED"},
      {Direction::bwd_filter, 6, "fft_tiling", "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING"},
  };
  int per_direction[3] = {0, 0, 0};
  for (const Row& r : rows) {
    EXPECT_EQ(algorithm_family(r.d, r.algo), r.family) << r.cudnn;
    EXPECT_EQ(cudnn_enum_name(r.d, r.algo), r.cudnn);
    ++per_direction[static_cast<int>(r.d)];
  }
  // The table above covers every value the runner knows: a new enum value needs a family here.
  for (Direction d : kDirections) EXPECT_EQ(per_direction[static_cast<int>(d)], algo_count(d));
}

TEST(CudnnAlgorithmNames, AnUnknownValueIsNotGivenAFamily) {
  EXPECT_EQ(algorithm_family(Direction::fwd, 8), "any");
  EXPECT_EQ(algorithm_family(Direction::bwd_data, 6), "any");
  EXPECT_EQ(algorithm_family(Direction::bwd_filter, -1), "any");
}

// Every name the runner can record is one compare reads (cases::parse_algorithm).
TEST(CudnnAlgorithmNames, CompareReadsEveryRecordedName) {
  for (Direction d : kDirections)
    for (int a = -1; a <= algo_count(d); ++a)
      EXPECT_TRUE(cases::parse_algorithm(algorithm_family(d, a))) << algorithm_family(d, a);
  for (int s : {-1, 0, 1, 2, 7, 64})
    for (int scheme : {-1, 0, 1, 2, 4})
      EXPECT_TRUE(cases::parse_algorithm(gemm_algorithm_family(s, scheme)))
          << gemm_algorithm_family(s, scheme);
}

TEST(CudnnAlgorithmNames, GemmIsDirectUnlessKIsSplit) {
  EXPECT_EQ(gemm_algorithm_family(1, 0), "direct");
  EXPECT_EQ(gemm_algorithm_family(1, 1), "direct");  // a scheme without a split sums once
  EXPECT_EQ(gemm_algorithm_family(4, 2), "split_k:4");
  EXPECT_EQ(gemm_algorithm_family(16, 0), "split_k:16");
  EXPECT_EQ(gemm_algorithm_family(-1, 4), "any");  // split, S unreadable
  EXPECT_EQ(gemm_algorithm_family(-1, 0), "direct");
  EXPECT_EQ(gemm_algorithm_family(-1, -1), "direct");
}

}  // namespace
}  // namespace validate::runners::cudnn_detail
