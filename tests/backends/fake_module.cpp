// Fake libvalidate_torch.so for backends.module_errors: a module from another commit
// (FAKE_COMMIT), of another interface version (FAKE_ABI), or without the entry point
// (FAKE_NOENTRY). provide() must never run: validate refuses the module before calling it.
#include <cstdlib>

#include "validate/backends/module.hpp"

namespace {
void provide(validate::backends::ModuleHost&) { std::abort(); }
}  // namespace

#ifndef FAKE_NOENTRY
extern "C" __attribute__((visibility("default"))) const validate::backends::ModuleEntry*
validate_module_entry() {
#ifdef FAKE_ABI
  static const validate::backends::ModuleEntry e{
      validate::backends::kModuleMagic, 999, "torch", "0.0.0", "0123456789ab-fake", "", provide};
#else
  static const validate::backends::ModuleEntry e{validate::backends::kModuleMagic,
                                                 validate::backends::kModuleAbi,
                                                 "torch",
                                                 "0.0.0",
                                                 "0123456789ab-fake",
                                                 validate::backends::kCompilerId,
                                                 provide};
#endif
  return &e;
}
#else
extern "C" __attribute__((visibility("default"))) int not_a_module() { return (void(provide), 0); }
#endif
