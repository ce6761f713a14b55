// The status helper, devices and buffers. The no-device paths run on every machine: they are what a
// CI box without a GPU exercises, and they must produce messages that name the CUDA call.
#include <gtest/gtest.h>

#include "gpu_test_util.hpp"
#include "validate/gpu/gpu.hpp"

namespace validate::gpu {
namespace {

Status failing_malloc() {
  VALIDATE_GPU_TRY(static_cast<cudaError_t>(cudaErrorMemoryAllocation));
  return Status::ok();
}

TEST(GpuCheck, MessageNamesTheCallAndTheError) {
  const Status st = check(cudaErrorMemoryAllocation, "cudaMalloc(&ptr, bytes)");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "cudaMalloc(…) failed: out of memory (cudaErrorMemoryAllocation)");
  EXPECT_TRUE(check(cudaSuccess, "cudaFree(p)"));
}

TEST(GpuCheck, TryReturnsTheFailure) {
  const Status st = failing_malloc();
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("static_cast<cudaError_t>(…) failed: out of memory"),
            std::string::npos)
      << st.message();
}

TEST(GpuDevice, ParsesDeviceNames) {
  EXPECT_EQ(*parse_device("cuda"), 0);
  EXPECT_EQ(*parse_device("cuda:3"), 3);
  for (const char* bad : {"cpu", "cuda:", "cuda:x", "cuda:-1", "gpu:0", ""}) {
    auto r = parse_device(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.message().find("expected cuda or cuda:N"), std::string::npos) << r.message();
  }
}

// Runs everywhere: without a device the error says "no usable CUDA device", why (the driver's own
// version tells "no driver" from "old driver"), and the CUDA error; with one, the device opens.
TEST(GpuDevice, RequireDeviceNamesTheCallOrSucceeds) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  const Status st = require_device(0);
  if (e != cudaSuccess || count == 0) {
    ASSERT_FALSE(st);
    EXPECT_EQ(st.message().rfind("no usable CUDA device: ", 0), 0u) << st.message();
    if (e != cudaSuccess) {
      EXPECT_NE(st.message().find(std::string("(cudaGetDeviceCount: ") + cudaGetErrorName(e) + ")"), std::string::npos)
          << st.message();
      int driver = 0;
      cudaDriverGetVersion(&driver);
      if (e == cudaErrorInsufficientDriver && driver == 0) {
        EXPECT_NE(st.message().find("no NVIDIA driver is loaded"), std::string::npos) << st.message();
      }
    }
    auto info = open_device(0);
    EXPECT_FALSE(info);
  } else {
    EXPECT_TRUE(st) << st.message();
    auto info = open_device(0);
    ASSERT_TRUE(info) << info.message();
    EXPECT_FALSE(info->name.empty());
    EXPECT_GE(info->cc_major, 7);
  }
  EXPECT_FALSE(require_device(1000));
}

TEST(GpuBuffer, AllocationFailureIsAValueNamingTheBuffer) {
  // 1 PiB: fails with a device (out of memory) and without one (no device); never throws.
  auto b = DeviceBuffer::allocate(std::size_t{1} << 50, "huge");
  ASSERT_FALSE(b);
  EXPECT_NE(b.message().find("cudaMalloc(…) failed for huge"), std::string::npos) << b.message();
  auto empty = DeviceBuffer::allocate(0);
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

// a failed cudaMalloc also sets CUDA's last error ("out of memory", not sticky); left
// there, the next kernel's launch check (cudaGetLastError) reported it as its own failure and
// failed the next case. Needs a device: without a driver the runtime's initialisation error is
// permanent for the process and no call can clear it.
TEST(GpuBuffer, FailedAllocationLeavesNoLastError) {
  VALIDATE_REQUIRE_GPU();
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  auto b = DeviceBuffer::allocate(std::size_t{1} << 50, "huge");
  ASSERT_FALSE(b);
  EXPECT_NE(b.message().find("out of memory"), std::string::npos) << b.message();
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess) << cudaGetErrorString(cudaPeekAtLastError());
  // And the device is usable right after: an allocation and a copy succeed.
  auto small = DeviceBuffer::allocate(64, "small");
  ASSERT_TRUE(small) << small.message();
  EXPECT_TRUE(small->fill_zero());
}

TEST(GpuBuffer, RoundTripAndMoveOnly) {
  VALIDATE_REQUIRE_GPU();
  static_assert(!std::is_copy_constructible_v<DeviceBuffer>);
  static_assert(std::is_nothrow_move_constructible_v<DeviceBuffer>);
  std::vector<int> host(1000), back(1000);
  for (int i = 0; i < 1000; ++i) host[i] = i * 7;
  auto b = DeviceBuffer::allocate(host.size() * sizeof(int), "ints");
  ASSERT_TRUE(b) << b.message();
  DeviceBuffer moved = std::move(*b);
  EXPECT_TRUE(b->empty());
  ASSERT_TRUE(moved.upload(host.data(), host.size() * sizeof(int)));
  ASSERT_TRUE(moved.download(back.data(), back.size() * sizeof(int)));
  EXPECT_EQ(host, back);
  EXPECT_FALSE(moved.upload(host.data(), moved.size() + 1));
}

}  // namespace
}  // namespace validate::gpu
