#include "exec_process.hpp"

#include "validate/runners/interrupt.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
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
