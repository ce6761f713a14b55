#include "exec_process.hpp"

#include "validate/backends/interrupt.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>
#include <utility>

namespace validate::runners::exec {

namespace {

using Clock = std::chrono::steady_clock;

// RAII for the spawn attribute objects, so no early return leaks them.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
};

// One process as /proc/<pid>/stat has it.
struct Proc {
  pid_t pid = 0, ppid = 0, pgid = 0;
  char state = '?';
};

std::vector<Proc> all_processes() {
  std::vector<Proc> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    std::ifstream f(std::string("/proc/") + e->d_name + "/stat");
    std::string line;
    if (!std::getline(f, line)) continue;  // gone meanwhile
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and ')', so parse after the last ')'.
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    Proc p;
    p.pid = static_cast<pid_t>(std::atol(e->d_name));
    long ppid = 0, pgid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %ld %ld", &p.state, &ppid, &pgid) != 3) continue;
    p.ppid = static_cast<pid_t>(ppid);
    p.pgid = static_cast<pid_t>(pgid);
    out.push_back(p);
  }
  ::closedir(d);
  return out;
}

// Every process below this one, by parent links.
std::vector<Proc> descendants() {
  const std::vector<Proc> all = all_processes();
  std::vector<Proc> out;
  std::set<pid_t> tree{::getpid()};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& p : all)
      if (tree.count(p.ppid) && tree.insert(p.pid).second) {
        out.push_back(p);
        grew = true;
      }
  }
  return out;
}

std::string command_line(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  while (!s.empty() && s.back() == '\0') s.pop_back();
  for (char& c : s)
    if (c == '\0') c = ' ';
    else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  if (s.size() > 120) s = s.substr(0, 117) + "...";
  return s;
}

// After the program's shell has been reaped: kills and reaps every process it left below validate
// (validate is their subreaper, so one that called setsid or double-forked is still found here;
// validate starts no other process while a program runs). Returns those that were still running
// outside the program's process group, which the group kill could not reach.
std::vector<std::string> contain_descendants(pid_t group) {
  std::vector<std::string> escaped;
  std::set<pid_t> named;
  for (int round = 0; round < 2000; ++round) {
    const std::vector<Proc> left = descendants();
    if (left.empty()) break;
    for (const auto& p : left) {
      if (p.state == 'Z') continue;
      if (p.pgid != group && named.insert(p.pid).second)
        escaped.push_back("pid " + std::to_string(p.pid) + " (" + command_line(p.pid) + ")");
      ::kill(p.pid, SIGKILL);
    }
    for (const auto& p : left)
      if (p.ppid == ::getpid()) ::waitpid(p.pid, nullptr, WNOHANG);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return escaped;
}

}  // namespace

std::string signal_description(int sig) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  const char* abbrev = sigabbrev_np(sig);
#else
  const char* abbrev = nullptr;
#endif
  const char* desc = strsignal(sig);
  std::string s = abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
  if (desc) s += std::string(" (") + desc + ")";
  return s;
}

ProcessResult run_shell(const std::string& cmd, const std::vector<std::string>& env,
                        const std::string& stdout_path, const std::string& stderr_path,
                        double timeout_s) {
  ProcessResult res;
  SpawnSetup s;
  posix_spawn_file_actions_addopen(&s.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&s.actions, STDOUT_FILENO, stdout_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&s.actions, STDERR_FILENO, stderr_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  // A new process group (so a timeout can kill the program's children too), an empty signal mask
  // and default dispositions for the signals a harness might have changed.
  posix_spawnattr_setflags(&s.attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&s.attr, 0);
  sigset_t none, defaults;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&s.attr, &none);
  sigemptyset(&defaults);
  for (int sig :
       {SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGCHLD, SIGALRM, SIGUSR1, SIGUSR2, SIGXFSZ})
    sigaddset(&defaults, sig);
  posix_spawnattr_setsigdefault(&s.attr, &defaults);

  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  char sh[] = "/bin/sh", dash_c[] = "-c";
  std::string command = cmd;
  char* argv[] = {sh, dash_c, command.data(), nullptr};

  // Orphans of the program (a `setsid cmd &` it started) are re-parented to validate instead of
  // init, so none can outlive its task unseen and write into the next task's run directory.
  static const bool subreaper = ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
  (void)subreaper;
  const auto t0 = Clock::now();
  pid_t pid = -1;
  if (int rc = posix_spawn(&pid, "/bin/sh", &s.actions, &s.attr, argv, envp.data()); rc != 0) {
    res.spawn_error = std::string("cannot start /bin/sh: ") + std::strerror(rc);
    return res;
  }

  // Poll for the exit without reaping (WNOWAIT): while the shell is an unreaped zombie its pid,
  // which is the process group's id, cannot be reused, so killing the group is always safe.
  const bool bounded = std::isfinite(timeout_s);
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(bounded ? timeout_s : 0));
  auto nap = std::chrono::microseconds(500);
  Clock::time_point forwarded_at{};
  for (;;) {
    siginfo_t si{};
    int rc = waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOHANG | WNOWAIT);
    if (rc == 0 && si.si_pid == pid) break;
    if (rc != 0 && errno != EINTR) break;  // ECHILD: someone else reaped it; waitpid below says so
    if (const int sig = interrupt_signal(); sig && !res.interrupted) {
      // A CI cancel: pass it on so the program can clean up, as it would have got it from a
      // terminal; SIGKILL follows after the grace period.
      res.interrupted = sig;
      forwarded_at = Clock::now();
      ::kill(-pid, sig);
    }
    if (res.interrupted &&
        Clock::now() - forwarded_at >= std::chrono::duration<double>(kInterruptGraceSeconds))
      break;
    if (bounded && Clock::now() >= deadline) {
      res.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(20000));
  }
  ::kill(-pid,
         SIGKILL);  // the group: on timeout everything, else whatever the program left running
  int status = 0;
  pid_t w;
  do {
    w = waitpid(pid, &status, 0);
  } while (w < 0 && errno == EINTR);
  res.escaped = contain_descendants(pid);
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (w < 0) {
    res.spawn_error = std::string("waiting for /bin/sh: ") + std::strerror(errno);
    return res;
  }
  if (res.timed_out) return res;
  if (WIFEXITED(status))
    res.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    res.signal = WTERMSIG(status);
  return res;
}

std::string file_tail(const std::string& path, std::size_t max_bytes) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  f.seekg(0, std::ios::end);
  const auto size = static_cast<std::size_t>(std::max<std::streamoff>(f.tellg(), 0));
  const std::size_t start = size > max_bytes ? size - max_bytes : 0;
  f.seekg(static_cast<std::streamoff>(start));
  std::string s(size - start, '\0');
  f.read(s.data(), static_cast<std::streamsize>(s.size()));
  s.resize(static_cast<std::size_t>(f.gcount()));
  if (start > 0) {
    // Do not start in the middle of a UTF-8 sequence.
    std::size_t i = 0;
    while (i < s.size() && i < 4 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
    s = "..." + s.substr(i);
  }
  while (!s.empty() &&
         (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.pop_back();
  return s;
}

TreeSnapshot snapshot_tree(const std::string& root, const std::vector<std::string>& skip) {
  TreeSnapshot snap;
  std::vector<std::string> pending{root};
  while (!pending.empty()) {
    const std::string path = std::move(pending.back());
    pending.pop_back();
    DIR* d = ::opendir(path.c_str());
    if (!d) continue;
    const int fd = ::dirfd(d);
    while (const dirent* e = ::readdir(d)) {
      const char* name = e->d_name;
      if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
      std::string full = path + "/" + name;
      bool skipped = false;
      for (const auto& s : skip) skipped = skipped || full == s;
      if (skipped) continue;
      struct stat st {};
      if (::fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
      TreeEntry t;
      t.dir = S_ISDIR(st.st_mode);
      t.link = S_ISLNK(st.st_mode);
      t.ino = static_cast<std::uint64_t>(st.st_ino);
      t.size = static_cast<std::int64_t>(st.st_size);
      t.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
      t.ctime_ns = static_cast<std::int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
      if (t.dir) pending.push_back(full);
      snap.emplace(std::move(full), t);
    }
    ::closedir(d);
  }
  return snap;
}

std::vector<std::string> tree_changes(const TreeSnapshot& before, const TreeSnapshot& after) {
  std::vector<std::string> out;
  auto b = before.begin();
  auto a = after.begin();
  while (b != before.end() || a != after.end()) {
    if (a == after.end() || (b != before.end() && b->first < a->first)) {
      out.push_back(b->first + " (deleted)");
      ++b;
    } else if (b == before.end() || a->first < b->first) {
      out.push_back(a->first + " (created)");
      ++a;
    } else {
      const TreeEntry &x = b->second, &y = a->second;
      if (x.dir != y.dir)
        out.push_back(a->first + " (replaced)");
      else if (!x.dir && (x.ino != y.ino || x.size != y.size || x.mtime_ns != y.mtime_ns ||
                          x.ctime_ns != y.ctime_ns))
        out.push_back(a->first + " (modified)");
      ++a;
      ++b;
    }
  }
  return out;
}

}  // namespace validate::runners::exec
