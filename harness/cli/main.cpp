// The `validate` executable: subcommands register themselves; main only maps outcomes to exit codes.
// Every subcommand is always compiled in. The ones that need LibTorch or CUDA (generate, run
// --backend torch|cudnn) load their module when they run (harness/backends), so this binary
// links neither and a build without them still parses, lists and explains every command.
#include <algorithm>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "validate/core/suggest.hpp"
#include "validate/core/version.hpp"

namespace {

std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
  return validate::did_you_mean(word, candidates);
}

// Every long and short name of the options of `app` and of its option groups.
std::vector<std::string> option_names(const CLI::App* app) {
  std::vector<std::string> out;
  for (const CLI::Option* o : app->get_options()) {
    for (const auto& l : o->get_lnames()) out.push_back("--" + l);
    for (const auto& sn : o->get_snames()) out.push_back("-" + sn);
  }
  for (const CLI::App* g : app->get_subcommands([](const CLI::App* a) { return a->get_name().empty(); })) {
    auto more = option_names(g);
    out.insert(out.end(), more.begin(), more.end());
  }
  return out;
}

// After a parse error: the first word on the command line that names no subcommand or option,
// with the nearest valid one. "" when every word is known (the error is about something else).
std::string unknown_word(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> commands;
  for (const CLI::App* s : app.get_subcommands({})) commands.push_back(s->get_name());
  if (argc < 2) return "";
  const std::string first = argv[1];
  if (first.rfind("-", 0) == 0) {
    const std::vector<std::string> top{"--help", "-h", "--version"};
    if (std::find(top.begin(), top.end(), first) != top.end()) return "";
    return "validate: unknown option '" + first + "'" + suggestion(first, top) +
           " (a command comes first: validate COMMAND --help; commands: " +
           [&] {
             std::string l;
             for (const auto& c : commands) l += (l.empty() ? "" : ", ") + c;
             return l;
           }() + ")";
  }
  CLI::App* sub = nullptr;
  try {
    sub = app.get_subcommand(first);
  } catch (const CLI::OptionNotFound&) {
    sub = nullptr;
  }
  if (!sub) {
    std::string l;
    for (const auto& c : commands) l += (l.empty() ? "" : ", ") + c;
    return "validate: unknown command '" + first + "'" + suggestion(first, commands) + " (commands: " + l + ")";
  }
  const std::vector<std::string> names = option_names(sub);
  for (int i = 2; i < argc; ++i) {
    std::string w = argv[i];
    if (w == "--") break;
    if (w.size() < 2 || w[0] != '-' || (w[1] >= '0' && w[1] <= '9') || w[1] == '.') continue;  // a value, -1
    if (const auto eq = w.find('='); eq != std::string::npos) w.resize(eq);
    if (w.rfind("--", 0) != 0 && w.size() > 2) w.resize(2);  // -abc: short flags bundled
    if (std::find(names.begin(), names.end(), w) == names.end())
      return "validate " + first + ": unknown option '" + w + "'" + suggestion(w, names) + " (validate " + first +
             " --help lists them)";
  }
  return "";
}

}  // namespace

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
    // CLI11 says "A subcommand is required" for `validate comapre` and "The following argument was
    // not expected" for a misspelt option, without the word: name it and the nearest valid one.
    if (e.get_exit_code() != 0)
      if (const std::string why = unknown_word(app, argc, argv); !why.empty()) {
        std::cerr << why << "\n";
        return 2;
      }
    int rc = app.exit(e);
    // CLI11 returns 0 for --help/--version; any real usage error is exit 2 (docs/cli.md, "Exit codes").
    return rc == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    // Nothing a user can give (bytes, files) may end validate with a signal (abort, exit 134):
    // an exception that escaped a command is reported and is exit 2.
    std::cerr << "validate: error: " << e.what() << "\n";
    return 2;
  }
  return exit_code;
}
