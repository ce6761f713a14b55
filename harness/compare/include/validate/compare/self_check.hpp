#pragma once
// A run made by the stack that made the references — LibTorch on the same kind of device, same
// LibTorch version — is bit-identical to them by construction: it proves the plumbing (layouts,
// files, hashes, the run/compare path), not that two stacks agree. On a CPU-only machine that is
// the only "torch" run there is, and a report that shows it like a cuDNN-vs-LibTorch check would
// overstate what was proven. Every reporter labels such a comparison a self-check.
#include <string>

#include <nlohmann/json.hpp>

namespace validate::compare {

// Why the run is the references' own stack ("LibTorch 1.13.0 on cpu made both the references
// and the run"), or "" when it is another stack or either side does not say. Reads
// REF_DIR/system_info.json; run_info is the run's run_info.json.
std::string same_stack_reason(const std::string& ref_dir, const nlohmann::json& run_info);

}  // namespace validate::compare
