// This build's registry and the choice of a runner (registry.hpp).
#include <fmt/format.h>

#include "validate/backends/module.hpp"
#include "validate/backends/registry.hpp"

namespace validate::backends {

// One function per backend folder, generated into registrations.cpp from VALIDATE_BACKENDS.
void register_all_backends(BackendRegistry& r);

BackendRegistry& registry() {
  static BackendRegistry* r = [] {
    auto* reg = new BackendRegistry;  // never destroyed: factories may run during exit
    register_all_backends(*reg);
    return reg;
  }();
  return *r;
}

Result<std::unique_ptr<runners::Runner>> make_runner(const std::string& name,
                                                     const BackendRequest& req) {
  const Backend* b = registry().find(name);
  if (!b)
    return Error{fmt::format("--backend {}: no such backend (this build knows: {})", name,
                             fmt::join(registry().names(), ", "))};
  if (!b->make && !b->module.empty()) {
    auto host = load_module(b->module, b->build_hint);
    if (!host) return Error{fmt::format("--backend {}: {}", name, host.message())};
    b = registry().find(name);
  }
  if (!b->make)
    return Error{
        fmt::format("--backend {}: module libvalidate_{}.so loaded but does not implement it", name,
                    b->module)};
  return b->make(req);
}

}  // namespace validate::backends
