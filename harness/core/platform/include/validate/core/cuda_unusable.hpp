#pragma once
// One wording for "this process cannot use a CUDA device", whichever stack found out: the cudnn
// runner asks the CUDA runtime itself, LibTorch asks through its own hooks. Both say
// "no usable CUDA device: <why>", and <why> names the cause in words a user can act on (no driver,
// a driver older than the runtime, no device) followed by the CUDA error that showed it.
// Pure text: no CUDA header is needed, so it is tested on machines without one.
#include <string>

namespace validate::core {

// "no usable CUDA device: " + why
std::string no_usable_cuda_device(const std::string& why);

// The values of the three cudaError_t codes the reason distinguishes (checked against cuda_runtime
// by a static_assert where the header is included: harness/gpu/src/device.cpp).
inline constexpr int kCudaErrorInsufficientDriver = 35;
inline constexpr int kCudaErrorDevicesUnavailable = 46;
inline constexpr int kCudaErrorNoDevice = 100;

// Why cudaGetDeviceCount failed (or found nothing): `error` is its cudaError_t (0 with
// device_count == 0 means it succeeded and counted none), `error_name`/`error_text` what
// cudaGetErrorName/cudaGetErrorString say, `driver_version` cudaDriverGetVersion's answer (0: no
// driver loaded), `runtime_version` cudaRuntimeGetVersion's (13000 = 13.0).
std::string cuda_unusable_reason(int error, const std::string& error_name, const std::string& error_text,
                                 int driver_version, int runtime_version, int device_count = 0);

}  // namespace validate::core
