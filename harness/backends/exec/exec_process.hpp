#pragma once
// Running one shell command for the exec runner (private to exec_*.cpp): its own process group,
// output to files, a hard timeout.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace validate::runners::exec {

struct ProcessResult {
  std::string spawn_error;  // non-empty: the shell could not be started (nothing ran)
  bool timed_out = false;   // killed by us after the timeout
  int exit_code = -1;       // >= 0 when it exited normally
  int signal = 0;           // > 0 when a signal ended it (not our timeout kill)
  int interrupted = 0;      // validate got this SIGINT/SIGTERM: forwarded, then killed after grace
  double seconds = 0;
  // Processes the program left running outside its process group (setsid, a daemon's double
  // fork) when its shell exited: "pid N (command line)". They have been killed and reaped.
  std::vector<std::string> escaped;
};

// Runs `/bin/sh -c cmd` with environment `env` ("NAME=value" strings), stdin from /dev/null,
// stdout and stderr into the given files (truncated), in a new process group. After `timeout_s`
// the whole group is sent SIGKILL; when the shell exits on its own, processes it left behind in
// its group are killed as well (before it is reaped, so its pid — the group id — cannot have been
// reused). Every other descendant (validate is their subreaper) is then killed and reaped, and
// the ones that escaped the group are listed in `escaped`; so one program runs at a time (the
// exec runner's tasks are sequential). posix_spawn, no fork of a multi-threaded image. When validate
// itself is asked to stop (interrupt.hpp), the signal is forwarded to the group, which gets
// kInterruptGraceSeconds to exit before SIGKILL.
ProcessResult run_shell(const std::string& cmd, const std::vector<std::string>& env,
                        const std::string& stdout_path, const std::string& stderr_path,
                        double timeout_s);

// The last `max_bytes` of a file (from a UTF-8-ish boundary), "..." in front when cut; trailing
// whitespace removed. Empty when the file is missing or empty.
std::string file_tail(const std::string& path, std::size_t max_bytes);

// "SIGSEGV (Segmentation fault)"
std::string signal_description(int sig);

// A picture of a directory tree cheap enough to take before and after every task, to catch a
// program that writes outside its work directory (into the reference set, another case's results,
// the run's own files): one readdir per directory and one lstat per entry, no reads, no hashing.
// A file counts as changed when its inode, size, mtime or ctime changed (a rewrite through a
// rename changes the inode; `touch -d` to hide a write still moves ctime). What it cannot see: an
// in-place rewrite to the same size within the filesystem's timestamp tick of the snapshot (a few
// ms); `compare` still catches a changed reference input by its hash.
struct TreeEntry {
  bool dir = false;
  bool link = false;  // a symbolic link (never followed)
  std::uint64_t ino = 0;
  std::int64_t size = 0, mtime_ns = 0, ctime_ns = 0;
};
using TreeSnapshot = std::map<std::string, TreeEntry>;  // path (root + "/" + relative) -> entry

// Every entry under `root` (symlinks not followed), leaving out the subtrees whose path equals one
// of `skip` (paths spelled as root + "/" + relative, i.e. normalised absolute paths when root is
// one). A missing or unreadable root or subdirectory contributes nothing.
TreeSnapshot snapshot_tree(const std::string& root, const std::vector<std::string>& skip);

// What differs, in path order: "PATH (created)", "PATH (deleted)", "PATH (modified)",
// "PATH (replaced)" (a file became a directory or back). A directory's own timestamps are ignored:
// they move whenever an entry is added, which the entry itself already shows.
std::vector<std::string> tree_changes(const TreeSnapshot& before, const TreeSnapshot& after);

}  // namespace validate::runners::exec
