#pragma once
// Each subcommand lives in its own cmd_<name>.cpp and registers itself on the app. The callback
// stores the command's exit code in `exit_code` (0 pass, 1 a gate/check failed, 2 bad usage or
// bad input); main() returns it.
#include <CLI/CLI.hpp>

namespace validate::cli {

void register_generate(CLI::App& app, int& exit_code);
void register_verify(CLI::App& app, int& exit_code);
void register_list(CLI::App& app, int& exit_code);
void register_run(CLI::App& app, int& exit_code);
void register_compare(CLI::App& app, int& exit_code);
void register_probe(CLI::App& app, int& exit_code);
void register_merge(CLI::App& app, int& exit_code);

}  // namespace validate::cli
