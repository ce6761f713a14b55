#pragma once
// On-demand modules: the code that needs LibTorch (libvalidate_torch.so: `generate` and the torch
// backend) or CUDA/cuDNN/cuBLASLt (libvalidate_cudnn.so: the cudnn backend) is built as a shared
// module that `validate` dlopens (RTLD_NOW | RTLD_LOCAL) only when a command needs it, so
// `validate --version`, `list`, `verify`, `compare`, `probe` and `merge` never map those
// libraries (they cost ~290 libraries, 0.5 s and 370 MB before any work).
//
// A module exports one C symbol, validate_module_entry, returning a ModuleEntry. The module links
// its own copy of the harness's static libraries (hidden: --exclude-libs), so C++ objects cross
// the boundary only as the types below, and only between a binary and a module built from the
// same commit with the same compiler: anything else is refused with an error naming both (exit 2),
// since a struct whose layout differs by one field would be read silently wrong.
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "validate/core/result.hpp"
#include "validate/core/version.hpp"
#include "validate/generate/generate.hpp"

namespace validate::backends {

class BackendRegistry;

using GenerateFn = Result<generate::GenerateSummary> (*)(const generate::GenerateOptions&,
                                                         std::ostream& log);

// What validate hands a module's provide(): the module fills in what it implements.
struct ModuleHost {
  BackendRegistry* backends = nullptr;  // provide(name, factory) for each backend it implements
  GenerateFn generate = nullptr;        // the torch module sets it
};

// Bumped whenever ModuleEntry or ModuleHost change. The first two fields never move, so a module
// of any version can be told apart and refused cleanly.
inline constexpr std::uint32_t kModuleMagic = 0x56414c44;  // "VALD"
inline constexpr std::uint32_t kModuleAbi = 1;

struct ModuleEntry {
  std::uint32_t magic;
  std::uint32_t abi;
  const char* name;        // "torch"
  const char* version;     // harness_version() of the module
  const char* git_commit;  // harness_git_commit() of the module
  const char* compiler;    // kCompilerId of the module
  void (*provide)(ModuleHost& host);
};

// Compiler and standard-library ABI the module was built with: std::string and friends cross the
// boundary, so both sides must agree.
#define VALIDATE_STR2(x) #x
#define VALIDATE_STR(x) VALIDATE_STR2(x)
inline constexpr const char* kCompilerId =
    __VERSION__ " cxx11abi=" VALIDATE_STR(_GLIBCXX_USE_CXX11_ABI);
#undef VALIDATE_STR
#undef VALIDATE_STR2

inline constexpr const char* kModuleEntrySymbol = "validate_module_entry";

// Loads libvalidate_<name>.so once per process and runs its provide() against registry() and the
// process's ModuleHost. Looks in <dir of the validate binary>/lib/validate (build tree) and
// <dir of the binary>/VALIDATE_MODULE_DIR_FROM_BIN (install tree: ../lib/validate). Errors:
// "not built into this installation" (no file), the dlopen error (a dependency missing), no
// entry symbol, or a module from another commit/compiler/ABI.
Result<const ModuleHost*> load_module(const std::string& name, const std::string& build_hint);

// The directories searched, in order (for messages and tests).
std::vector<std::string> module_dirs();

// `validate generate`'s implementation, from the torch module.
Result<GenerateFn> load_generate();

}  // namespace validate::backends

// Defined by each module (harness/backends/<name>/module.cpp) with VALIDATE_DEFINE_MODULE.
#define VALIDATE_DEFINE_MODULE(module_name, provide_fn)                                      \
  extern "C" __attribute__((visibility("default"))) const ::validate::backends::ModuleEntry* \
  validate_module_entry() {                                                                  \
    static const std::string version = ::validate::harness_version();                        \
    static const std::string commit = ::validate::harness_git_commit();                      \
    static const ::validate::backends::ModuleEntry entry{::validate::backends::kModuleMagic, \
                                                         ::validate::backends::kModuleAbi,   \
                                                         module_name,                        \
                                                         version.c_str(),                    \
                                                         commit.c_str(),                     \
                                                         ::validate::backends::kCompilerId,  \
                                                         provide_fn};                        \
    return &entry;                                                                           \
  }
