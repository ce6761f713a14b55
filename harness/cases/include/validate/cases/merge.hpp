#pragma once
// `validate merge OUT SHARD...`: combines the shards of a generate (or run) into one set with a
// fresh manifest. Shards must be complete (have a manifest), come from the same case file, seed and
// fill, and not overlap: a case present in two shards is refused, never silently picked.
#include <string>
#include <vector>

#include "validate/core/result.hpp"

namespace validate::cases {

struct MergeSummary {
  std::size_t shards = 0, cases = 0, files = 0;
  std::uint64_t bytes = 0;
};

Result<MergeSummary> merge_sets(const std::string& out, const std::vector<std::string>& shards);

}  // namespace validate::cases
