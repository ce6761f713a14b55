#pragma once
// Running one shell command for the exec runner (private to exec_*.cpp): its own process group,
// output to files, a hard timeout.
#include <cstddef>
#include <string>
#include <vector>

namespace validate::runners::exec {

struct ProcessResult {
  std::string spawn_error;  // non-empty: the shell could not be started (nothing ran)
  bool timed_out = false;   // killed by us after the timeout
  int exit_code = -1;       // >= 0 when it exited normally
  int signal = 0;           // > 0 when a signal ended it (not our timeout kill)
  double seconds = 0;
};

// Runs `/bin/sh -c cmd` with environment `env` ("NAME=value" strings), stdin from /dev/null,
// stdout and stderr into the given files (truncated), in a new process group. After `timeout_s`
// the whole group is sent SIGKILL; when the shell exits on its own, processes it left behind in
// its group are killed as well (before it is reaped, so its pid — the group id — cannot have been
// reused). Thread-safe: posix_spawn, no fork of a multi-threaded image.
ProcessResult run_shell(const std::string& cmd, const std::vector<std::string>& env,
                        const std::string& stdout_path, const std::string& stderr_path,
                        double timeout_s);

// The last `max_bytes` of a file (from a UTF-8-ish boundary), "..." in front when cut; trailing
// whitespace removed. Empty when the file is missing or empty.
std::string file_tail(const std::string& path, std::size_t max_bytes);

// "SIGSEGV (Segmentation fault)"
std::string signal_description(int sig);

}  // namespace validate::runners::exec
