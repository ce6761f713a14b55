#include "validate/gpu/device.hpp"

#include <cstdlib>

#include "validate/core/cuda_unusable.hpp"
#include "validate/gpu/check.hpp"

static_assert(cudaErrorInsufficientDriver == validate::core::kCudaErrorInsufficientDriver);
static_assert(cudaErrorDevicesUnavailable == validate::core::kCudaErrorDevicesUnavailable);
static_assert(cudaErrorNoDevice == validate::core::kCudaErrorNoDevice);

namespace validate::gpu {

Result<int> parse_device(const std::string& text) {
  if (text == "cuda") return 0;
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    char* end = nullptr;
    const long v = std::strtol(text.c_str() + 5, &end, 10);
    if (*end == '\0' && v >= 0 && v < 1024) return static_cast<int>(v);
  }
  return Error{"device '" + text + "': expected cuda or cuda:N"};
}

Status require_device(int index) {
  int count = 0;
  // cudaGetDeviceCount is the first call that needs the driver: without a GPU (or without a
  // driver) it is the one that fails. Its own text ("CUDA driver version is insufficient for CUDA
  // runtime version") reads as "upgrade the driver" on a machine that has none, so the message
  // names the cause (core::cuda_unusable_reason), worded as LibTorch's path words it.
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    (void)cudaGetLastError();  // clear the sticky error for whoever asks next
    int driver = 0, runtime = 0;
    (void)cudaDriverGetVersion(&driver);
    (void)cudaRuntimeGetVersion(&runtime);
    return Error{core::no_usable_cuda_device(core::cuda_unusable_reason(
        e, cudaGetErrorName(e), cudaGetErrorString(e), driver, runtime, count))};
  }
  if (index >= count)
    return Error{"cuda:" + std::to_string(index) + " does not exist (cudaGetDeviceCount reports " +
                 std::to_string(count) + " device" + (count == 1 ? "" : "s") + ")"};
  VALIDATE_GPU_TRY(cudaSetDevice(index));
  // Creates the primary context now, so a broken device fails here with its own message instead of
  // inside the first cudaMalloc of a case.
  VALIDATE_GPU_TRY(cudaFree(nullptr));
  return Status::ok();
}

Result<DeviceInfo> open_device(int index) {
  VALIDATE_TRY(require_device(index));
  cudaDeviceProp p{};
  VALIDATE_GPU_TRY(cudaGetDeviceProperties(&p, index));
  DeviceInfo d;
  d.index = index;
  d.name = p.name;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.total_memory = p.totalGlobalMem;
  d.multiprocessors = p.multiProcessorCount;
  VALIDATE_GPU_TRY(cudaRuntimeGetVersion(&d.runtime_version));
  VALIDATE_GPU_TRY(cudaDriverGetVersion(&d.driver_version));
  return d;
}

nlohmann::json to_json(const DeviceInfo& d) {
  auto ver = [](int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); };
  return {{"index", d.index},
          {"name", d.name},
          {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
          {"total_memory_bytes", d.total_memory},
          {"multiprocessors", d.multiprocessors},
          {"cuda_runtime", ver(d.runtime_version)},
          {"cuda_driver", ver(d.driver_version)}};
}

}  // namespace validate::gpu
