#pragma once
// Naming the process that holds an flock, for the "--out is being written by pid N (cmd)" refusal
// (output_dir.hpp rule 2).
//
// /proc/locks lists a lock by "MAJ:MIN:INODE" of the inode's superblock, and fstat's st_dev is not
// always that device (btrfs subvolumes and some overlays report their own), so a line whose inode
// matches but whose device does not is taken only when that pid is seen holding the very file open
// in /proc/<pid>/fd. Without any usable line (a /proc that hides other pid namespaces' locks), a
// process other than this one with the directory open is named as such, never as the lock's owner.
// CI once printed "being written by another process" for a holder that was alive (stop 20).
#include <sys/types.h>

#include <istream>
#include <string>
#include <vector>

namespace validate::fs {

struct FlockLine {
  long pid = 0;
  bool same_device = false;  // MAJ:MIN equals st_dev's; otherwise only the inode matched
};

// The FLOCK lines of a /proc/locks text on inode `ino` (blocked waiters' "->" lines skipped).
std::vector<FlockLine> flock_lines(std::istream& proc_locks, dev_t dev, ino_t ino);

// Whether /proc/<pid>/fd holds a descriptor on the file (dev, ino).
bool has_open(long pid, dev_t dev, ino_t ino);

// "pid 1234 (validate generate --out x)" for the holder of an flock on (dev, ino), or "" when it
// cannot be told from /proc/locks.
std::string flock_holder(dev_t dev, ino_t ino);

// "pid 1234 (validate run ...) has it open" for other processes with a descriptor on (dev, ino),
// or "".
std::string other_openers(dev_t dev, ino_t ino);

}  // namespace validate::fs
