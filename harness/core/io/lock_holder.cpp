#include "validate/core/lock_holder.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <sstream>

namespace validate::fs {

namespace {

std::string command_line(long pid) {
  std::string cmd;
  std::ifstream cl("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::getline(cl, cmd, '\xff');
  for (auto& ch : cmd)
    if (ch == '\0') ch = ' ';
  while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
  return cmd;
}

std::string describe(long pid) {
  const std::string cmd = command_line(pid);
  return "pid " + std::to_string(pid) + (cmd.empty() ? "" : " (" + cmd + ")");
}

bool all_digits(const char* s) {
  if (!*s) return false;
  for (; *s; ++s)
    if (!std::isdigit(static_cast<unsigned char>(*s))) return false;
  return true;
}

}  // namespace

std::vector<FlockLine> flock_lines(std::istream& in, dev_t dev, ino_t ino) {
  std::vector<FlockLine> out;
  std::string line;
  while (std::getline(in, line)) {
    // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a blocked waiter: "1: -> FLOCK  ..."
    std::istringstream ss(line);
    std::string idx, kind, adv, mode, pid, where;
    if (!(ss >> idx >> kind) || kind == "->") continue;
    if (!(ss >> adv >> mode >> pid >> where) || kind != "FLOCK") continue;
    const auto c1 = where.find(':'), c2 = where.rfind(':');
    if (c1 == std::string::npos || c2 == c1) continue;
    try {
      const unsigned long maj = std::stoul(where.substr(0, c1), nullptr, 16);
      const unsigned long min = std::stoul(where.substr(c1 + 1, c2 - c1 - 1), nullptr, 16);
      const unsigned long long node = std::stoull(where.substr(c2 + 1));
      const long p = std::stol(pid);
      if (node != static_cast<unsigned long long>(ino) || p <= 0) continue;
      out.push_back({p, maj == major(dev) && min == minor(dev)});
    } catch (const std::exception&) {
      continue;
    }
  }
  return out;
}

bool has_open(long pid, dev_t dev, ino_t ino) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return false;
  bool found = false;
  while (const dirent* e = ::readdir(d)) {
    if (!all_digits(e->d_name)) continue;
    struct stat st {};
    // stat follows the magic link to the open file itself, through the same mount as our fstat.
    if (::stat((dir + "/" + e->d_name).c_str(), &st) == 0 && st.st_dev == dev && st.st_ino == ino) {
      found = true;
      break;
    }
  }
  ::closedir(d);
  return found;
}

std::string flock_holder(dev_t dev, ino_t ino) {
  std::ifstream in("/proc/locks");
  const std::vector<FlockLine> lines = flock_lines(in, dev, ino);
  for (const FlockLine& l : lines)
    if (l.same_device) return describe(l.pid);
  for (const FlockLine& l : lines)
    if (has_open(l.pid, dev, ino)) return describe(l.pid);
  return "";
}

std::string other_openers(dev_t dev, ino_t ino) {
  DIR* d = ::opendir("/proc");
  if (!d) return "";
  const long self = static_cast<long>(::getpid());
  std::string out;
  int n = 0;
  while (const dirent* e = ::readdir(d)) {
    if (!all_digits(e->d_name)) continue;
    const long pid = std::atol(e->d_name);
    if (pid == self || !has_open(pid, dev, ino)) continue;
    if (n++ == 3) {
      out += ", ...";
      break;
    }
    out += (out.empty() ? "" : ", ") + describe(pid);
  }
  ::closedir(d);
  return out.empty() ? "" : out + (n == 1 ? " has it open" : " have it open");
}

}  // namespace validate::fs
