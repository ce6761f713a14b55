#pragma once
// Walking and removing directory trees that others wrote (reference sets, run directories, an exec
// program's work directory) without ever following a symbolic link.
//
// The traps this exists for (docs/reliability.md): std::filesystem's recursive iterator
// stats through symlinks, so `ln -s loopy loopy` inside a set threw an uncaught filesystem_error
// (exit 134); a mode-000 directory left by a program did the same for a non-root user; and a path
// under a symlinked directory sent remove_all and writes outside --out.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "validate/core/result.hpp"

namespace validate::fs {

enum class EntryType { regular, directory, symlink, other };  // other: FIFO, socket, device

struct TreeEntry {
  std::string rel;  // relative to the root, '/'-separated
  EntryType type = EntryType::other;
  std::uint64_t size = 0;  // regular files
};

const char* entry_type_name(EntryType t);  // "regular file", "directory", "symbolic link", ...

struct TreeWalk {
  std::vector<TreeEntry> entries;   // every entry below the root (directories too), sorted by rel
  std::vector<std::string> errors;  // "ROOT/sub: cannot read directory: Permission denied"
};

// Lists everything under `root` with lstat semantics: a symlink is reported as a symlink and never
// descended into, a directory that cannot be read becomes an error line (the walk goes on).
// Error only when `root` itself is not a readable directory.
Result<TreeWalk> walk_tree(const std::string& root);

// Removes `path` and everything below it without following symlinks (a link is unlinked, never its
// target). Directories of ours that were made unreadable (mode 000) are made accessible first.
// A missing path is not an error.
Status remove_tree(const std::string& path);

// Removes everything inside the directory `dir` (not `dir` itself), as remove_tree does.
Status empty_directory(const std::string& dir);

}  // namespace validate::fs
