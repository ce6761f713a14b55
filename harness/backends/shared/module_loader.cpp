// dlopen of libvalidate_<name>.so on first use; module.hpp says why and what is checked.
#include <dlfcn.h>

#include <cstdlib>

#include <filesystem>
#include <map>
#include <system_error>

#include <fmt/format.h>

#include "validate/backends/module.hpp"
#include "validate/backends/registry.hpp"
#include "validate/core/version.hpp"

#ifndef VALIDATE_MODULE_DIR_FROM_BIN
#define VALIDATE_MODULE_DIR_FROM_BIN "../lib/validate"
#endif

namespace validate::backends {

namespace fs = std::filesystem;

namespace {

fs::path executable_dir() {
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path{} : exe.parent_path();
}

ModuleHost& host() {
  static ModuleHost h;
  return h;
}

// Refuses a module whose types could differ from ours. The magic and abi are read first: they are
// the two fields every version of ModuleEntry keeps in place.
Status check_entry(const ModuleEntry* e, const std::string& path, const std::string& name) {
  if (!e || e->magic != kModuleMagic)
    return Error{fmt::format("{}: not a validate module (bad entry point)", path)};
  if (e->abi != kModuleAbi)
    return Error{
        fmt::format("{}: module interface version {}, this validate speaks {}: the module is from "
                    "another release; rebuild and reinstall validate and its modules together",
                    path, e->abi, kModuleAbi)};
  std::string problem;
  if (std::string(e->name) != name)
    problem = fmt::format("it is module '{}', not '{}'", e->name, name);
  else if (e->version != harness_version() || e->git_commit != harness_git_commit())
    problem = fmt::format("it was built from validate {}+{}, this binary is {}+{}", e->version,
                          e->git_commit, harness_version(), harness_git_commit());
  else if (std::string(e->compiler) != kCompilerId)
    problem =
        fmt::format("it was built with '{}', this binary with '{}'", e->compiler, kCompilerId);
  if (problem.empty()) return Status::ok();
  return Error{fmt::format("{}: {}; rebuild both (cmake --build) or reinstall them together", path,
                           problem)};
}

Result<const ModuleHost*> open_module(const std::string& name, const std::string& build_hint) {
  const std::string file = "libvalidate_" + name + ".so";
  std::vector<std::string> looked;
  for (const auto& dir : module_dirs()) {
    fs::path path = fs::path(dir) / file;
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      looked.push_back(dir);
      continue;
    }
    // LibTorch's OpenMP threads (libgomp, which reads this as the module loads it) spin after
    // every parallel region before they sleep. With as many threads as cores, that spinning took
    // a fifth of generate's CPU samples from its writer threads (3 of 18 CPU-s on the float32
    // sweep). A policy the user set is kept (no overwrite).
    ::setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0);
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) return Error{fmt::format("cannot load {}: {}", path.string(), dlerror())};
    using EntryFn = const ModuleEntry* (*)();
    auto fn = reinterpret_cast<EntryFn>(dlsym(handle, kModuleEntrySymbol));
    if (!fn)
      return Error{fmt::format("{}: no {} symbol: not a validate module", path.string(),
                               kModuleEntrySymbol)};
    const ModuleEntry* entry = fn();
    if (auto st = check_entry(entry, path.string(), name); !st) return st;
    ModuleHost& h = host();
    h.backends = &registry();
    entry->provide(h);
    return &h;  // the handle stays open for the life of the process: runners live in it
  }
  return Error{fmt::format("not built into this installation ({} not found in {}){}", file,
                           fmt::join(looked, ", "), build_hint.empty() ? "" : "; " + build_hint)};
}

}  // namespace

std::vector<std::string> module_dirs() {
  fs::path bin = executable_dir();
  if (bin.empty()) return {};
  std::vector<std::string> dirs{(bin / "lib" / "validate").string(),
                                (bin / VALIDATE_MODULE_DIR_FROM_BIN).lexically_normal().string()};
  if (dirs[1] == dirs[0]) dirs.pop_back();
  return dirs;
}

Result<const ModuleHost*> load_module(const std::string& name, const std::string& build_hint) {
  static std::map<std::string, Result<const ModuleHost*>> loaded;
  auto it = loaded.find(name);
  if (it == loaded.end()) it = loaded.emplace(name, open_module(name, build_hint)).first;
  return it->second;
}

Result<GenerateFn> load_generate() {
  auto h = load_module(
      "torch", "configure with LibTorch (VALIDATE_TORCH=ON; scripts/install-deps.sh installs it)");
  if (!h) return h.status();
  if (!(*h)->generate) return Error{"libvalidate_torch.so loaded but provides no generator"};
  return (*h)->generate;
}

}  // namespace validate::backends
