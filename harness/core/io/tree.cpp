#include "validate/core/tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace validate::fs {

namespace {

std::string strerror_text(int e) { return std::strerror(e); }

bool dot_or_dotdot(const char* n) {
  return n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'));
}

EntryType type_of(mode_t m) {
  if (S_ISREG(m)) return EntryType::regular;
  if (S_ISDIR(m)) return EntryType::directory;
  if (S_ISLNK(m)) return EntryType::symlink;
  return EntryType::other;
}

// Opens a directory relative to `parent_fd` without following a symlink in its last component.
int open_dir_at(int parent_fd, const char* name) {
  return ::openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

void walk(int dir_fd, const std::string& rel, const std::string& shown, TreeWalk& out) {
  DIR* d = ::fdopendir(dir_fd);
  if (!d) {
    out.errors.push_back(shown + ": cannot read directory: " + strerror_text(errno));
    ::close(dir_fd);
    return;
  }
  std::vector<std::string> subdirs;
  errno = 0;
  while (const dirent* e = ::readdir(d)) {
    if (dot_or_dotdot(e->d_name)) continue;
    struct stat st {};
    const std::string child = rel.empty() ? e->d_name : rel + "/" + e->d_name;
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT)
        out.errors.push_back(shown + "/" + e->d_name + ": " + strerror_text(errno));
      continue;
    }
    TreeEntry t{child, type_of(st.st_mode), static_cast<std::uint64_t>(st.st_size)};
    if (t.type == EntryType::directory) subdirs.push_back(e->d_name);
    out.entries.push_back(std::move(t));
  }
  for (const auto& s : subdirs) {
    const std::string child = rel.empty() ? s : rel + "/" + s;
    int fd = open_dir_at(::dirfd(d), s.c_str());
    if (fd < 0) {
      out.errors.push_back(shown + "/" + s + ": cannot read directory: " + strerror_text(errno));
      continue;
    }
    walk(fd, child, shown + "/" + s, out);
  }
  ::closedir(d);
}

// Removes every entry of the open directory `dir_fd` (closed on return).
Status remove_children(int dir_fd, const std::string& shown) {
  DIR* d = ::fdopendir(dir_fd);
  if (!d) {
    int e = errno;
    ::close(dir_fd);
    return Error{"cannot read directory " + shown + ": " + strerror_text(e)};
  }
  std::vector<std::pair<std::string, bool>> names;  // name, is a real directory
  while (const dirent* e = ::readdir(d)) {
    if (dot_or_dotdot(e->d_name)) continue;
    struct stat st {};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    names.emplace_back(e->d_name, S_ISDIR(st.st_mode));
  }
  Status result;
  for (const auto& [name, is_dir] : names) {
    const std::string path = shown + "/" + name;
    if (is_dir) {
      // A program may have left it mode 000: as its owner we can give ourselves access back.
      ::fchmodat(::dirfd(d), name.c_str(), 0700, 0);
      int fd = open_dir_at(::dirfd(d), name.c_str());
      if (fd < 0) {
        if (result) result = Error{"cannot open directory " + path + ": " + strerror_text(errno)};
        continue;
      }
      Status st = remove_children(fd, path);
      if (!st && result) result = st;
      if (::unlinkat(::dirfd(d), name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT && result)
        result = Error{"cannot remove directory " + path + ": " + strerror_text(errno)};
    } else if (::unlinkat(::dirfd(d), name.c_str(), 0) != 0 && errno != ENOENT && result) {
      result = Error{"cannot remove " + path + ": " + strerror_text(errno)};
    }
  }
  ::closedir(d);
  return result;
}

}  // namespace

const char* entry_type_name(EntryType t) {
  switch (t) {
    case EntryType::regular: return "regular file";
    case EntryType::directory: return "directory";
    case EntryType::symlink: return "symbolic link";
    case EntryType::other: return "special file (FIFO, socket or device)";
  }
  return "?";
}

Result<TreeWalk> walk_tree(const std::string& root) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Error{root + ": cannot read directory: " + strerror_text(errno)};
  TreeWalk out;
  walk(fd, "", root, out);
  std::sort(out.entries.begin(), out.entries.end(),
            [](const TreeEntry& a, const TreeEntry& b) { return a.rel < b.rel; });
  return out;
}

Status remove_tree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::ok();
    return Error{"cannot remove " + path + ": " + strerror_text(errno)};
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      return Error{"cannot remove " + path + ": " + strerror_text(errno)};
    return Status::ok();
  }
  ::chmod(path.c_str(), 0700);
  VALIDATE_TRY(empty_directory(path));
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT)
    return Error{"cannot remove directory " + path + ": " + strerror_text(errno)};
  return Status::ok();
}

Status empty_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Error{"cannot open directory " + dir + ": " + strerror_text(errno)};
  return remove_children(fd, dir);
}

}  // namespace validate::fs
