// The one wording of "no usable CUDA device" and its reasons, for the error codes and driver
// versions the CUDA runtime reports (values from cuda_runtime_api.h: 35, 46, 100).
#include <gtest/gtest.h>

#include "validate/core/cuda_unusable.hpp"

using namespace validate::core;

TEST(CudaUnusable, NoDriverIsNotCalledAnOldDriver) {
  // What a machine with the CUDA runtime but no NVIDIA driver gets from cudaGetDeviceCount.
  const std::string why = cuda_unusable_reason(35, "cudaErrorInsufficientDriver",
                                               "CUDA driver version is insufficient for CUDA runtime version",
                                               /*driver*/ 0, /*runtime*/ 13000);
  EXPECT_EQ(no_usable_cuda_device(why),
            "no usable CUDA device: no NVIDIA driver is loaded on this machine "
            "(cudaGetDeviceCount: cudaErrorInsufficientDriver)");
}

TEST(CudaUnusable, AnOldDriverNamesBothVersions) {
  const std::string why = cuda_unusable_reason(35, "cudaErrorInsufficientDriver", "x", 12080, 13000);
  EXPECT_EQ(why, "the NVIDIA driver supports CUDA 12.8, older than the CUDA 13.0 runtime this program uses; "
                 "install a newer driver (cudaGetDeviceCount: cudaErrorInsufficientDriver)");
}

TEST(CudaUnusable, NoDeviceBusyDevicesZeroDevicesAndOtherErrors) {
  EXPECT_EQ(cuda_unusable_reason(100, "cudaErrorNoDevice", "no CUDA-capable device is detected", 13000, 13000),
            "the NVIDIA driver is loaded but sees no CUDA-capable device (cudaGetDeviceCount: cudaErrorNoDevice)");
  EXPECT_EQ(cuda_unusable_reason(46, "cudaErrorDevicesUnavailable", "busy", 13000, 13000),
            "every CUDA device is busy or unavailable (exclusive or prohibited compute mode) "
            "(cudaGetDeviceCount: cudaErrorDevicesUnavailable)");
  EXPECT_EQ(cuda_unusable_reason(0, "cudaSuccess", "no error", 13000, 13000, 0),
            "the NVIDIA driver reports no CUDA device (cudaGetDeviceCount: 0 devices)");
  EXPECT_EQ(cuda_unusable_reason(0, "cudaSuccess", "no error", 13000, 13000, 2), "");
  EXPECT_EQ(cuda_unusable_reason(999, "cudaErrorUnknown", "unknown error", 13000, 13000),
            "unknown error (cudaGetDeviceCount: cudaErrorUnknown)");
}
