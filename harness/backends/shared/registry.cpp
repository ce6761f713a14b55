// The registry itself; a module links this file alone (registry() and the backends are in
// select.cpp, which a module must not pull in).
#include "validate/backends/registry.hpp"

#include <fmt/format.h>

namespace validate::backends {

const std::string& BackendRequest::value(const std::string& flag) const {
  static const std::string empty;
  auto it = values.find(flag);
  return it == values.end() ? empty : it->second;
}

Status BackendRegistry::add(Backend b) {
  if (find(b.name)) return Error{"backend '" + b.name + "' is registered twice"};
  for (const auto& o : b.options)
    for (const auto& other : backends_)
      for (const auto& oo : other.options)
        if (oo.flag == o.flag)
          return Error{fmt::format("backend '{}': option {} is already an option of backend '{}'",
                                   b.name, o.flag, other.name)};
  backends_.push_back(std::move(b));
  return Status::ok();
}

Status BackendRegistry::provide(const std::string& name, RunnerFactory make) {
  for (auto& b : backends_)
    if (b.name == name) {
      b.make = make;
      return Status::ok();
    }
  return Error{"a module provides backend '" + name + "', which validate does not declare"};
}

const Backend* BackendRegistry::find(const std::string& name) const {
  for (const auto& b : backends_)
    if (b.name == name) return &b;
  return nullptr;
}

std::vector<std::string> BackendRegistry::names() const {
  std::vector<std::string> v;
  for (const auto& b : backends_) v.push_back(b.name);
  return v;
}

}  // namespace validate::backends
