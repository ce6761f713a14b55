#pragma once
// `validate merge OUT SHARD...`: combines the shards of a generate (or run) into one set with a
// fresh manifest, as if it had been made in one go.
//  - Shards must be finished (a manifest, no failed cases), of one format and one sweep (case
//    file, seed, fill, --only; for runs: backend, layout and reference), and must not overlap: a
//    case in two shards is refused, never silently picked.
//  - Each shard records its `--shard i/n` (config.json or run_info.json "selection"); all n must be
//    there, unless allow_partial. A merge of 2 of 3 shards would otherwise pass for the sweep.
//  - OUT must be absent or empty, so no file of an earlier set survives among the merged ones.
//  - A reference set gets a config.json whose dtypes and expanded_cases are in the unsharded order
//    (shard i holds items i, i+n, i+2n, ... of the sweep) and the README.md generate writes.
#include <cstdint>
#include <string>
#include <vector>

#include "validate/core/result.hpp"

namespace validate::cases {

struct MergeOptions {
  bool allow_partial = false;  // merge a subset of the shards (recorded as "partial" in the set)
  bool overwrite = false;      // replace a non-empty OUT whole
};

struct MergeSummary {
  std::size_t shards = 0, cases = 0, files = 0;
  std::uint64_t bytes = 0;
  std::vector<std::string> missing;  // shards absent from a partial merge, as "i/n"
};

Result<MergeSummary> merge_sets(const std::string& out, const std::vector<std::string>& shards,
                                const MergeOptions& opt = {});

}  // namespace validate::cases
