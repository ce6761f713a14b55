// The `validate` executable: subcommands register themselves; main only maps outcomes to exit codes.
#include <iostream>

#include "commands.hpp"
#include "validate/core/version.hpp"

namespace validate::cli {

// Subcommands whose module is not part of this build register a stub that says so (exit 2).
// A real definition in another translation unit overrides these weak ones at link time.
#define VALIDATE_WEAK_COMMAND(fn, name, why)                                                 \
  __attribute__((weak)) void fn(CLI::App& app, int& exit_code) {                             \
    auto* sub = app.add_subcommand(name, std::string(name) + " (not available: " why ")");   \
    sub->allow_extras();                                                                     \
    sub->callback([&exit_code] {                                                             \
      std::cerr << "validate " name ": not available in this build (" why ")\n";             \
      exit_code = 2;                                                                         \
    });                                                                                      \
  }
VALIDATE_WEAK_COMMAND(register_generate, "generate", "built without LibTorch")
VALIDATE_WEAK_COMMAND(register_run, "run", "runners module not built")
VALIDATE_WEAK_COMMAND(register_compare, "compare", "compare module not built")
VALIDATE_WEAK_COMMAND(register_probe, "probe", "layout module not built")
#undef VALIDATE_WEAK_COMMAND

}  // namespace validate::cli

int main(int argc, char** argv) {
  CLI::App app{"validate: prove two numerical stacks compute the same conv2d and matmul", "validate"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "validate " + validate::harness_version() + "+" + validate::harness_git_commit());
  int exit_code = 0;
  validate::cli::register_generate(app, exit_code);
  validate::cli::register_verify(app, exit_code);
  validate::cli::register_list(app, exit_code);
  validate::cli::register_run(app, exit_code);
  validate::cli::register_compare(app, exit_code);
  validate::cli::register_probe(app, exit_code);
  validate::cli::register_merge(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    // CLI11 returns 0 for --help/--version; any real usage error is exit 2 per DESIGN.md.
    return rc == 0 ? 0 : 2;
  }
  return exit_code;
}
