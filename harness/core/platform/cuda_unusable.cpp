#include "validate/core/cuda_unusable.hpp"

namespace validate::core {

namespace {

std::string cuda_version(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

}  // namespace

std::string no_usable_cuda_device(const std::string& why) { return "no usable CUDA device: " + why; }

std::string cuda_unusable_reason(int error, const std::string& error_name, const std::string& error_text,
                                 int driver_version, int runtime_version, int device_count) {
  const std::string shown = error_name.empty() ? "" : " (cudaGetDeviceCount: " + error_name + ")";
  if (error == 0)
    return device_count == 0 ? "the NVIDIA driver reports no CUDA device (cudaGetDeviceCount: 0 devices)"
                             : "";
  if (error == kCudaErrorInsufficientDriver) {
    // The runtime says "driver version is insufficient" both when there is no driver at all and
    // when it is too old; the driver's own version tells the two apart.
    if (driver_version <= 0) return "no NVIDIA driver is loaded on this machine" + shown;
    return "the NVIDIA driver supports CUDA " + cuda_version(driver_version) + ", older than the CUDA " +
           cuda_version(runtime_version) + " runtime this program uses; install a newer driver" + shown;
  }
  if (error == kCudaErrorNoDevice) return "the NVIDIA driver is loaded but sees no CUDA-capable device" + shown;
  if (error == kCudaErrorDevicesUnavailable)
    return "every CUDA device is busy or unavailable (exclusive or prohibited compute mode)" + shown;
  return (error_text.empty() ? std::string("cudaGetDeviceCount failed") : error_text) + shown;
}

}  // namespace validate::core
