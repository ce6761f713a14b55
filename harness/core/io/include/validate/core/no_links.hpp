#pragma once
// The check before validate creates, writes or deletes anything below a directory it owns (a run's
// --out): a symbolic link there, planted by a program the run executes, would have the write land
// wherever it points (the reference set, another directory). Nothing is written through one.
#include <string>

#include "validate/core/result.hpp"

namespace validate::fs {

// Ok when no existing component of `path` below `root` (the last one included) is a symbolic
// link; components that do not exist yet are fine (validate creates them). `path` must lie
// lexically inside `root`; both are spelled as the caller builds them (root + "/" + relative).
Status refuse_links_below(const std::string& root, const std::string& path);

}  // namespace validate::fs
