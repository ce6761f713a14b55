// The `validate` executable: subcommands register themselves; main only maps outcomes to exit codes.
// Every subcommand is always compiled in. The ones that need LibTorch or CUDA (generate, run
// --backend torch|cudnn) load their module when they run (harness/backends), so this binary
// links neither and a build without them still parses, lists and explains every command.
#include <iostream>

#include "commands.hpp"
#include "validate/core/version.hpp"

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
  } catch (const std::exception& e) {
    // Nothing a user can give (bytes, files) may end validate with a signal (abort, exit 134):
    // an exception that escaped a command is reported and is exit 2.
    std::cerr << "validate: error: " << e.what() << "\n";
    return 2;
  }
  return exit_code;
}
