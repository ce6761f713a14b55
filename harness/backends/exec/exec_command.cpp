// --cmd: the placeholders a command may use, the check that none is quoted, and their expansion
// (each value shell-quoted by validate itself). Declared in exec_runner.hpp.
#include <string>

#include "validate/core/shell_quote.hpp"
#include "validate/backends/exec_runner.hpp"

namespace validate::runners {

namespace {

// The placeholders of --cmd, in the order expand_command() takes their values.
constexpr const char* kPlaceholders[] = {"{dir}", "{case}", "{op}", "{dtype}"};

// Index in kPlaceholders of the placeholder that starts at cmd[i]; -1 when none does.
int placeholder_at(const std::string& cmd, std::size_t i) {
  if (cmd[i] != '{') return -1;
  for (int k = 0; k < 4; ++k)
    if (cmd.compare(i, std::char_traits<char>::length(kPlaceholders[k]), kPlaceholders[k]) == 0) return k;
  return -1;
}

}  // namespace

Status check_placeholders_unquoted(const std::string& cmd) {
  // Shell quoting state while walking the command: a placeholder inside '...' or "..." would be
  // quoted twice, and '{dir}' with $(...) in the path ran that command.
  enum { none, single, dbl } q = none;
  for (std::size_t i = 0; i < cmd.size(); ++i) {
    const char ch = cmd[i];
    if (const int k = q != none ? placeholder_at(cmd, i) : -1; k >= 0) {
      const std::string key = kPlaceholders[k];
      return Error{"--cmd: " + key + " is inside quotes; validate quotes every placeholder itself, so write " + key +
                   " without quotes around it (not \"" + key + "\" or '" + key + "')"};
    }
    if (q == single) {
      if (ch == '\'') q = none;
      continue;
    }
    if (ch == '\\') {
      ++i;
      continue;
    }
    if (q == dbl && ch == '"') {
      q = none;
      continue;
    }
    if (q == none && ch == '\'') {
      q = single;
      continue;
    }
    if (q == none && ch == '"') {
      q = dbl;
      continue;
    }
  }
  return Status::ok();
}

std::string expand_command(const std::string& cmd, const std::string& dir,
                           const std::string& case_name, const std::string& op,
                           const std::string& dtype) {
  const std::string* values[] = {&dir, &case_name, &op, &dtype};  // kPlaceholders' order
  std::string out;
  for (std::size_t i = 0; i < cmd.size();) {
    if (const int k = placeholder_at(cmd, i); k >= 0) {
      out += shell_quote(*values[k]);
      i += std::char_traits<char>::length(kPlaceholders[k]);
    } else {
      out += cmd[i++];
    }
  }
  return out;
}

}  // namespace validate::runners
