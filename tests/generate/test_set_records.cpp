// What a generated set records beside its tensors: each result's max |value| in the metadata, the
// BLAS and threads in force, and why a CUDA request fell back to the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "common/temp_dir.hpp"
#include "generate/generate_fixture.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/npy.hpp"
#include "validate/cases/refset.hpp"
#include "validate/core/sha256.hpp"
#include "validate/generate/generate.hpp"
#include "validate/generate/torch_reference.hpp"

using namespace validate;
using validate::testing::write_case_file;
using validate::testing::options;

namespace {

// The small case file's g2 case, float32 and bfloat16, generated into <dir>/ref.
void generate_g2(const std::string& dir) {
  std::ostringstream log;
  auto o = options(write_case_file(dir), dir + "/ref");
  o.only = "^(float32|bfloat16)/g2$";
  ASSERT_TRUE(generate::generate(o, log)) << log.str();
}

}  // namespace

// Results carry max|value| in their metadata (compare's near-zero floor without a pre-pass);
// it must be the maximum of the file's values, and inputs carry none.
TEST(Generate, MetadataRecordsMaxAbsOfEveryResult) {
  validate::testing::TempDir tmp("maxabs");
  ASSERT_NO_FATAL_FAILURE(generate_g2(tmp.path()));
  int checked = 0;
  for (const char* dt : {"float32", "bfloat16"}) {
    const std::string dir = tmp.path() + "/ref/" + dt;
    auto meta = read_json(dir + "/g2_metadata.json");
    ASSERT_TRUE(meta) << meta.message();
    for (const auto& [op, opj] : (*meta)["ops"].items())
      for (const auto& [name, tj] : opj["tensors"].items()) {
        auto t = npy::read(dir + "/" + tj["file"].get<std::string>());
        ASSERT_TRUE(t) << t.message();
        double want = 0;
        for (std::int64_t i = 0; i < t->numel(); ++i) want = std::max(want, std::abs(t->get(i)));
        if (tj["role"] == "input") {
          EXPECT_FALSE(tj.contains("max_abs")) << dt << " " << op << "." << name;
          continue;
        }
        ASSERT_TRUE(tj.contains("max_abs")) << dt << " " << op << "." << name;
        EXPECT_EQ(tj["max_abs"].get<double>(), want) << dt << " " << op << "." << name;
        EXPECT_GT(want, 0) << dt << " " << op << "." << name;
        ++checked;
      }
  }
  EXPECT_EQ(checked, 2 * (4 + 4));  // no bias: conv output, loss, grad_input, grad_weight; matmul 4
}

// system_info.json says which BLAS computed the set and on how many threads: references made with
// the reference BLAS and with OpenBLAS differ by tens of ULP. The library is checked against this
// process's own /proc/self/maps (LibTorch is loaded here too), not against the code that wrote it.
TEST(Generate, SystemInfoRecordsTheBlasAndThreadsInForce) {
  validate::testing::TempDir tmp("sysinfo");
  std::string cf = write_case_file(tmp.path());
  std::ostringstream log;
  auto o = options(cf, tmp.path() + "/ref");
  o.only = "^float32/g2$";
  o.threads = 2;
  ASSERT_TRUE(generate::generate(o, log));
  auto sys = read_json(tmp.path() + "/ref/system_info.json");
  ASSERT_TRUE(sys) << sys.message();
  EXPECT_EQ((*sys)["threads"], 2);
  EXPECT_EQ((*sys)["threads_source"], "--threads");
  ASSERT_TRUE((*sys).contains("blas")) << sys->dump(2);
  const Json& blas = (*sys)["blas"];
  ASSERT_TRUE(blas["library"].is_string()) << blas.dump();
  EXPECT_EQ(blas["omp_max_threads"], 2);  // LibTorch and OpenBLAS-OpenMP share libgomp's count
  std::set<std::string> mapped;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    // Debian's LibTorch uses libblas.so.3; PyPI's has its BLAS inside libtorch_cpu.so: either way
    // the library named must be one this process has mapped.
    if (path.find("libblas") != std::string::npos || path.find("libtorch_cpu") != std::string::npos)
      mapped.insert(std::filesystem::canonical(path).string());
  }
  EXPECT_EQ(mapped.count(blas["library"].get<std::string>()), 1u) << blas.dump();
  if (blas["name"] == "OpenBLAS") {
    EXPECT_EQ(blas["openblas_threads"], 2) << blas.dump();
  }
}

// --device cuda on a machine LibTorch finds no usable device on (every CI machine): the set is made on
// the CPU and system_info.json says so with the reason; the TF32 and cuDNN flags are the ones the
// options set (run twice, TF32 on then off, so a flag left at a default cannot pass both).
TEST(Generate, CudaWithoutADeviceFallsBackRecordingWhyAndTheTf32AndCudnnFlags) {
  for (const bool tf32 : {true, false}) {
    validate::testing::TempDir tmp("cudafallback");
    std::string cf = write_case_file(tmp.path());
    std::ostringstream log;
    auto o = options(cf, tmp.path() + "/ref");
    o.only = "^float32/g2$";
    o.device = "cuda";
    o.allow_tf32 = tf32;
    ASSERT_TRUE(generate::generate(o, log));
    auto sys = read_json(tmp.path() + "/ref/system_info.json");
    ASSERT_TRUE(sys) << sys.message();
    if ((*sys)["cuda_available"] == true) GTEST_SKIP() << "this machine has a usable CUDA device";
    EXPECT_EQ((*sys)["device_requested"], "cuda");
    EXPECT_EQ((*sys)["device"], "cpu");
    const std::string why = (*sys).value("device_fallback", std::string());
    EXPECT_EQ(why.rfind("no usable CUDA device: ", 0), 0u) << why;
    // A CUDA LibTorch names the driver-side cause; a CPU one says it has no CUDA.
    if (!(*sys)["libtorch_cuda"].is_null()) {
      EXPECT_EQ(why.find("built without CUDA"), std::string::npos) << why;
    } else {
      EXPECT_NE(why.find("built without CUDA"), std::string::npos) << why;
    }
    EXPECT_EQ((*sys)["tf32"]["cudnn"], tf32);
    EXPECT_EQ((*sys)["tf32"]["cublas"], tf32);
    EXPECT_EQ((*sys)["cudnn_deterministic"], true);
    EXPECT_EQ((*sys)["cudnn_benchmark"], false);
  }
}

// Error-bound scales are stored as float16 times 2^unit_log2, rounded up (docs/formats.md,
// "scales"): against the float32 scales torch_compute gives for the set's own inputs, every
// stored value is at least the scale and at most one float16 step above it; the metadata's
// sha256 is the data section's, and the manifest lists the file.
TEST(Generate, ScalesAreStoredAsFloat16RoundedUpWithTheirUnit) {
  validate::testing::TempDir tmp("scales16");
  ASSERT_NO_FATAL_FAILURE(generate_g2(tmp.path()));
  auto manifest = read_json(tmp.path() + "/ref/manifest.json");
  ASSERT_TRUE(manifest);
  auto dev = generate::open_torch_device("cpu", false);
  ASSERT_TRUE(dev);
  auto list = cases::load_cases(tmp.path() + "/ref");
  ASSERT_TRUE(list);
  int checked = 0;
  for (const auto& rc : *list) {
    const cases::Case& c = rc.c;
    auto meta = read_json(rc.dtype_dir + "/" + c.name + "_metadata.json");
    ASSERT_TRUE(meta);
    for (const cases::OpInstance& inst : c.ops) {
      const cases::Op op = inst.op();
      std::map<std::string, Tensor> in;
      std::map<std::string, const Tensor*> view;
      for (const auto& t : c.tensors(op))
        if (t.role == cases::Role::input) {
          auto x = npy::read(rc.dtype_dir + "/" + c.file_name(op, t.name));
          ASSERT_TRUE(x) << x.message();
          in.emplace(t.name, std::move(x).value());
        }
      for (auto& [k, v] : in) view[k] = &v;
      auto want = generate::torch_compute(c, op, view, *dev, nullptr, nullptr, /*scales=*/true);
      ASSERT_TRUE(want) << want.message();
      for (const auto& [name, entry] : (*meta)["ops"][cases::op_name(op)]["scales"].items()) {
        const std::string what = std::string(dtype_name(c.dtype)) + " " + cases::op_name(op) + "." + name;
        auto stored = npy::read(rc.dtype_dir + "/" + entry["file"].get<std::string>());
        ASSERT_TRUE(stored) << what;
        ASSERT_EQ(stored->dtype(), DType::float16) << what;
        ASSERT_TRUE(entry["unit_log2"].is_number_integer()) << what;
        EXPECT_EQ(entry["sha256"], sha256_hex(stored->bytes(), stored->nbytes())) << what;
        EXPECT_TRUE((*manifest)["files"].contains(std::string(dtype_name(c.dtype)) + "/" + entry["file"].get<std::string>()))
            << what;
        const double unit = std::ldexp(1.0, entry["unit_log2"].get<int>());
        const Tensor& s = want->at(name + "_scale");
        ASSERT_EQ(stored->shape(), s.shape()) << what;
        double most = 0;
        for (std::int64_t i = 0; i < s.numel(); ++i) most = std::max(most, s.get(i));
        EXPECT_GE(most / unit, 16384.0) << what;  // the largest in [2^14, 2^15) units
        EXPECT_LT(most / unit, 32768.0) << what;
        for (std::int64_t i = 0; i < s.numel(); ++i) {
          const double x = s.get(i), v = stored->get(i) * unit;
          EXPECT_GE(v, x * (1 - 1e-6)) << what << " " << i;  // (1e-6: the two LibTorch runs' threads)
          EXPECT_LE(v, x * (1 + std::ldexp(1.0, -10)) + std::ldexp(unit, -24) + x * 1e-6) << what << " " << i;
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 2 * (3 + 3));  // no bias: conv output, grad_input, grad_weight; matmul 3
}
