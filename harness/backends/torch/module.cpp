// libvalidate_torch.so: everything that needs LibTorch — `validate generate` and the torch
// backend. Loaded by validate on first use (harness/backends/include/validate/backends/module.hpp).
#include "validate/backends/module.hpp"
#include "validate/backends/registry.hpp"
#include "validate/generate/generate.hpp"
#include "validate/backends/torch_runner.hpp"

namespace validate::backends {
namespace {

Result<std::unique_ptr<runners::Runner>> make_torch(const BackendRequest& req) {
  return runners::make_torch_runner({req.device, req.allow_tf32, req.threads});
}

Result<generate::GenerateSummary> run_generate(const generate::GenerateOptions& opt,
                                               std::ostream& log) {
  return generate::generate(opt, log);
}

void provide(ModuleHost& host) {
  (void)host.backends->provide("torch", make_torch);
  host.generate = run_generate;
}

}  // namespace
}  // namespace validate::backends

VALIDATE_DEFINE_MODULE("torch", ::validate::backends::provide)
