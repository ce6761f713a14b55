// The cuDNN runner's options and its no-device behaviour: none of this needs a GPU, so it runs on
// every machine that builds the runner.
#include <gtest/gtest.h>

#include "gpu_test_util.hpp"
#include "validate/runners/cudnn_runner.hpp"

namespace validate::runners {
namespace {

layout::LayoutSet torch_layouts() { return *layout::load_layout("torch"); }

std::string rejection(const CudnnOptions& o) {
  auto r = make_cudnn_runner(o, torch_layouts());
  return r ? std::string() : r.message();
}

TEST(CudnnOptions, DefaultsAreAccepted) {
  EXPECT_TRUE(check_cudnn_options({}));
  auto r = make_cudnn_runner({}, torch_layouts());
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ((*r)->name(), "cudnn");
  const auto info = (*r)->info();
  EXPECT_EQ(info["math"], "fma");
  EXPECT_EQ(info["tf32"], false);
}

TEST(CudnnOptions, RejectsBogusMath) {
  CudnnOptions o;
  o.math = "bogus";
  const std::string m = rejection(o);
  EXPECT_NE(m.find("--math 'bogus'"), std::string::npos) << m;
  EXPECT_NE(m.find("fma"), std::string::npos) << m;
  EXPECT_NE(m.find("tf32"), std::string::npos) << m;
}

TEST(CudnnOptions, RejectsBadConvModeDeviceAndRepeat) {
  CudnnOptions o;
  o.conv_mode = "correlation";
  EXPECT_NE(rejection(o).find("--conv-mode 'correlation'"), std::string::npos);
  o = {};
  o.device = "cpu";
  EXPECT_NE(rejection(o).find("CUDA device only"), std::string::npos) << rejection(o);
  o = {};
  o.repeat = 0;
  EXPECT_NE(rejection(o).find("--repeat 0"), std::string::npos);
}

TEST(CudnnOptions, AlgorithmNamesPerDirection) {
  CudnnOptions o;
  for (const char* ok :
       {"auto", "all", "IMPLICIT_PRECOMP_GEMM", "CUDNN_CONVOLUTION_FWD_ALGO_FFT", "7"}) {
    o.algo_fwd = ok;
    EXPECT_TRUE(check_cudnn_options(o)) << ok;
  }
  o = {};
  o.algo_bwd_filter = "ALGO_3";
  EXPECT_TRUE(check_cudnn_options(o));
  // A forward-only name for backward data is refused with the names that direction has.
  o = {};
  o.algo_bwd_data = "IMPLICIT_GEMM";
  const Status st = check_cudnn_options(o);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("--algo-bwd-data 'IMPLICIT_GEMM'"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("ALGO_0, ALGO_1, FFT"), std::string::npos) << st.message();
  o = {};
  o.algo_fwd = "8";
  EXPECT_FALSE(check_cudnn_options(o));
  EXPECT_EQ(cudnn_algo_names("fwd").size(), 8u);
  EXPECT_EQ(cudnn_algo_names("bwd_data").size(), 6u);
  EXPECT_EQ(cudnn_algo_names("bwd_filter").size(), 7u);
  EXPECT_EQ(cudnn_algo_names("bwd_filter")[3], "ALGO_3");
}

// Runs everywhere: without a device prepare() fails with "no usable CUDA device: <why>", the
// wording the torch runner uses too (the CLI turns it into exit 2); with one it succeeds and info()
// gains the GPU.
TEST(CudnnRunner, PrepareWithoutDeviceSaysNoUsableCudaDeviceAndWhy) {
  auto r = make_cudnn_runner({}, torch_layouts());
  ASSERT_TRUE(r) << r.message();
  const Status st = (*r)->prepare();
  if (gpu::require_device(0)) {
    ASSERT_TRUE(st) << st.message();
    EXPECT_TRUE((*r)->info().contains("gpu"));
  } else {
    ASSERT_FALSE(st);
    EXPECT_EQ(st.message().rfind("--backend cudnn: no usable CUDA device: ", 0), 0u) << st.message();
    EXPECT_NE(st.message().find("(cudaGetDeviceCount: cuda"), std::string::npos) << st.message();
    // Never the runtime's "driver version is insufficient", which reads as "upgrade the driver".
    EXPECT_EQ(st.message().find("insufficient"), std::string::npos) << st.message();
    EXPECT_FALSE((*r)->info().contains("gpu"));
    // And a run() after a failed prepare() is an error result, not a crash.
    cases::Case c;
    c.name = "x";
    OpTask task;
    task.c = &c;
    auto results = (*r)->run(task);
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].outcome, RunOutcome::error);
  }
}

}  // namespace
}  // namespace validate::runners
