// The cuDNN runner's options and its no-device behaviour: none of this needs a GPU, so it runs on
// every machine that builds the runner.
#include <gtest/gtest.h>

#include <cstring>

#include "gpu_test_util.hpp"
#include "validate/backends/cudnn_runner.hpp"

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
  EXPECT_FALSE(check_cudnn_options(o));
  for (const char* ok : {"auto", "xcorr", "conv"}) {
    o.conv_mode = ok;
    EXPECT_TRUE(check_cudnn_options(o)) << ok;
  }
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

// --- --conv-mode against the layout's conv2d weight spec (no device: make_cudnn_runner decides) ---

layout::LayoutSet with_weight(const char* base, const char* weight, const char* name) {
  auto ls = *layout::load_layout(base);
  auto spec = layout::parse_spec(weight, "OIHW");
  EXPECT_TRUE(spec) << spec.message();
  ls.ops["conv2d"]["weight"] = ls.ops["conv2d"]["grad_weight"] = *spec;
  ls.name = name;
  return ls;
}

// The mode the runner made for `ls` reports in info(), or the refusal.
struct Made {
  std::string mode, chosen_by, error;
};
Made make(const char* conv_mode, const layout::LayoutSet& ls) {
  CudnnOptions o;
  o.conv_mode = conv_mode;
  auto r = make_cudnn_runner(o, ls);
  if (!r) return {"", "", r.message()};
  const auto info = (*r)->info();
  return {info.value("conv_mode", "?"), info.value("conv_mode_chosen_by", "?"), ""};
}

TEST(CudnnConvMode, DefaultIsAutomatic) {
  EXPECT_EQ(CudnnOptions{}.conv_mode, "auto");
  const Made m = make("auto", torch_layouts());
  EXPECT_EQ(m.error, "");
  EXPECT_EQ(m.mode, "xcorr");
  EXPECT_EQ(m.chosen_by, "auto: conv2d weight OIHW");
}

// The fortran preset's weights declare +flip=HW (pre-flipped for CUDNN_CONVOLUTION): auto is conv.
// Every other preset stores the kernel unflipped: auto is xcorr, PyTorch's cross-correlation.
TEST(CudnnConvMode, AutoFollowsEachPresetsWeightSpec) {
  for (const auto& name : layout::preset_names()) {
    const auto ls = *layout::load_layout(name);
    const Made m = make("auto", ls);
    ASSERT_EQ(m.error, "") << name;
    const std::string weight = layout::to_string(*ls.find("conv2d", "weight"));
    EXPECT_EQ(m.chosen_by, "auto: conv2d weight " + weight) << name;
    EXPECT_EQ(m.mode, name == "fortran" ? "conv" : "xcorr") << name << ": weight " << weight;
  }
  EXPECT_EQ(make("auto", *layout::load_layout("fortran")).chosen_by,
            "auto: conv2d weight WHIO:F+flip=HW");
  EXPECT_EQ(make("auto", *layout::load_layout("channels_last")).mode, "xcorr");
  // resolve_conv_mode is what the runner used.
  auto r = resolve_conv_mode("auto", *layout::load_layout("fortran"));
  ASSERT_TRUE(r) << r.message();
  EXPECT_TRUE(r->convolution);
  r = resolve_conv_mode("auto", *layout::load_layout("channels_last"));
  ASSERT_TRUE(r) << r.message();
  EXPECT_FALSE(r->convolution);
}

// What the layout declares decides, not the preset's name: any storage order flipped in H and W is
// conv, any unflipped one xcorr.
TEST(CudnnConvMode, AutoFollowsALayoutFilesWeightSpec) {
  EXPECT_EQ(make("auto", with_weight("torch", "OIHW+flip=HW", "a.json")).mode, "conv");
  EXPECT_EQ(make("auto", with_weight("channels_last", "HWIO:F+flip=HW", "b.json")).mode, "conv");
  EXPECT_EQ(make("auto", with_weight("fortran", "WHIO:F", "c.json")).mode, "xcorr");
  EXPECT_EQ(make("auto", with_weight("torch", "IOWH", "d.json")).mode, "xcorr");
}

TEST(CudnnConvMode, ExplicitModeThatAgreesIsTaken) {
  Made m = make("conv", *layout::load_layout("fortran"));
  EXPECT_EQ(m.error, "");
  EXPECT_EQ(m.mode, "conv");
  EXPECT_EQ(m.chosen_by, "--conv-mode conv");
  for (const char* p : {"torch", "channels_last", "linear_out_in"}) {
    m = make("xcorr", *layout::load_layout(p));
    EXPECT_EQ(m.error, "") << p;
    EXPECT_EQ(m.mode, "xcorr") << p;
    EXPECT_EQ(m.chosen_by, "--conv-mode xcorr") << p;
  }
}

// xcorr with a kernel stored rotated, or conv with one stored as is, computes something else than
// conv2d: refused before anything runs, naming the option, the layout and the weight spec.
TEST(CudnnConvMode, ExplicitModeThatContradictsTheLayoutIsRefused) {
  std::string e = make("xcorr", *layout::load_layout("fortran")).error;
  EXPECT_EQ(e.rfind("--conv-mode xcorr contradicts layout 'fortran'", 0), 0u) << e;
  EXPECT_NE(e.find("WHIO:F+flip=HW"), std::string::npos) << e;
  EXPECT_NE(e.find("pass --conv-mode conv"), std::string::npos) << e;
  for (const char* p : {"torch", "channels_last"}) {
    e = make("conv", *layout::load_layout(p)).error;
    EXPECT_EQ(e.rfind(std::string("--conv-mode conv contradicts layout '") + p + "'", 0), 0u) << e;
    EXPECT_NE(e.find(layout::to_string(*layout::load_layout(p)->find("conv2d", "weight"))),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("pass --conv-mode xcorr"), std::string::npos) << e;
  }
  e = make("xcorr", with_weight("torch", "OIHW+flip=HW", "mine.json")).error;
  EXPECT_EQ(e.rfind("--conv-mode xcorr contradicts layout 'mine.json'", 0), 0u) << e;
  EXPECT_FALSE(resolve_conv_mode("conv", *layout::load_layout("torch")));
}

// A kernel flipped in one spatial axis is neither stored as is nor rotated by 180 degrees: no
// mode computes conv2d from it, so even auto refuses.
TEST(CudnnConvMode, OneSpatialAxisFlippedIsRefusedInEveryMode) {
  for (const char* weight : {"OIHW+flip=H", "WHIO:F+flip=W"})
    for (const char* mode : {"auto", "xcorr", "conv"}) {
      const std::string e = make(mode, with_weight("torch", weight, "half.json")).error;
      EXPECT_EQ(e.rfind(std::string("--conv-mode ") + mode + ": layout 'half.json'", 0), 0u) << e;
      EXPECT_NE(e.find(std::string("flipped in ") + weight[std::strlen(weight) - 1] + " only"),
                std::string::npos)
          << e;
    }
}

// Without conv2d nothing reads the mode: auto is xcorr, an explicit one is kept as given.
TEST(CudnnConvMode, LayoutsWithoutConv2d) {
  auto ls = torch_layouts();
  ls.ops.erase("conv2d");
  EXPECT_EQ(make("auto", ls).mode, "xcorr");
  EXPECT_EQ(make("auto", ls).chosen_by, "auto: no conv2d in the layouts");
  EXPECT_EQ(make("conv", ls).mode, "conv");
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
