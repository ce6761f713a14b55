#pragma once
// Opening a CUDA device by name ("cuda", "cuda:1") and describing it for run_info.json. Without a
// usable device every entry point returns an Error naming the CUDA call that said so, so a machine
// without a GPU gets a message and an exit code, never a crash.
#include <string>

#include <nlohmann/json.hpp>

#include "validate/core/result.hpp"

namespace validate::gpu {

struct DeviceInfo {
  int index = 0;
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int cc_major = 0, cc_minor = 0;
  std::size_t total_memory = 0;
  int multiprocessors = 0;
  int runtime_version = 0, driver_version = 0;  // 13000 = 13.0
};

// "cuda" -> 0, "cuda:N" -> N; anything else is a usage error naming the accepted forms.
Result<int> parse_device(const std::string& text);

// Ok when device `index` exists and a context can be created on it (cudaSetDevice + cudaFree(0));
// else an Error naming the failing call, e.g.
// "no usable CUDA device: the NVIDIA driver is loaded but sees no CUDA-capable device
// (cudaGetDeviceCount: cudaErrorNoDevice)" (core::cuda_unusable_reason).
Status require_device(int index = 0);

// require_device, then the device's properties; makes `index` current.
Result<DeviceInfo> open_device(int index);

nlohmann::json to_json(const DeviceInfo& d);

}  // namespace validate::gpu
