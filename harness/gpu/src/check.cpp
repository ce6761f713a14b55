#include "validate/gpu/check.hpp"

namespace validate::gpu {

std::string gpu_error_text(cudaError_t e) {
  return std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ")";
}

std::string call_name(std::string_view call) {
  const auto paren = call.find('(');
  if (paren == std::string_view::npos) return std::string(call);
  // "::cudaMalloc(" and "gpu::launch(" keep their qualifier; only the argument list goes.
  return std::string(call.substr(0, paren)) + "(…)";
}

}  // namespace validate::gpu
