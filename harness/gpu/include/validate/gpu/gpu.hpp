#pragma once
// Umbrella header for validate::gpu: status checks, devices, device buffers, layout and dtype
// conversion kernels. CUDA only: compiled when the toolkit is found (VALIDATE_HAVE_CUDA).
#include "validate/gpu/cast.hpp"
#include "validate/gpu/check.hpp"
#include "validate/gpu/device.hpp"
#include "validate/gpu/device_buffer.hpp"
#include "validate/gpu/permute.hpp"
