#pragma once
// The backends `validate run --backend NAME` can use. A backend is a name, a one-line description,
// its own command-line options and a factory that makes a runners::Runner. The descriptions live
// in the `validate` binary (so `validate run --help` lists every backend and option without
// loading anything); the factory of a backend with heavy dependencies lives in an on-demand module
// (libvalidate_<module>.so, module.hpp) and is filled in when that module is loaded.
// docs/architecture.md, "How to add a backend".
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "validate/core/result.hpp"
#include "validate/layout/preset.hpp"
#include "validate/backends/runner.hpp"

namespace validate::backends {

// One backend-specific option of `validate run`, e.g. {"--conv-mode", "xcorr | conv", "xcorr"}.
// Values reach the factory as strings; the factory parses and checks them (an Error is exit 2).
struct BackendOption {
  std::string flag;  // "--conv-mode"
  std::string help;
  std::string default_value;  // "" when there is none
  bool is_flag = false;       // a switch without a value: "1" when given, else default_value
  std::string type_name = "TEXT";  // what --help shows: "FLOAT", "INT"
};

// What `validate run` hands every factory.
struct BackendRequest {
  const layout::LayoutSet* layouts = nullptr;  // never null
  std::string ref;                             // the reference set (exec guards it against writes)
  std::string device;  // --device; device_given says whether the user gave it
  bool device_given = false;
  int threads = 0;          // --threads (0: the backend's default)
  bool allow_tf32 = false;  // --allow-tf32
  // Every option of this backend: the value given, else its default_value.
  std::map<std::string, std::string> values;
  std::set<std::string> given;  // the option flags the user actually gave

  const std::string& value(const std::string& flag) const;  // "" when absent
};

using RunnerFactory = Result<std::unique_ptr<runners::Runner>> (*)(const BackendRequest&);

struct Backend {
  std::string name;         // --backend NAME
  std::string description;  // one line for --help
  // "" : built into the validate binary. Otherwise the module that supplies `make`
  // (libvalidate_<module>.so, loaded on first use).
  std::string module;
  std::string build_hint;  // how to get the module built, for the "not built" error
  std::vector<BackendOption> options;
  RunnerFactory make = nullptr;  // built-in backends set it; modules set theirs when loaded
};

class BackendRegistry {
 public:
  // Error when the name is taken or an option flag collides with another backend's (the flags
  // share one `validate run` command line).
  Status add(Backend b);
  // A module supplies the factory of a backend it declared in its descriptor.
  Status provide(const std::string& name, RunnerFactory make);
  const Backend* find(const std::string& name) const;
  const std::vector<Backend>& all() const { return backends_; }
  std::vector<std::string> names() const;

 private:
  std::vector<Backend> backends_;
};

// Every backend of this build, in registration order (harness/backends/CMakeLists.txt,
// VALIDATE_BACKENDS). Module backends are listed whether or not their module was built.
BackendRegistry& registry();

// The runner for `req`: the built-in factory, or the backend's module loaded now
// (module.hpp; "not built into this installation" when it is absent, exit 2).
Result<std::unique_ptr<runners::Runner>> make_runner(const std::string& backend,
                                                     const BackendRequest& req);

}  // namespace validate::backends
