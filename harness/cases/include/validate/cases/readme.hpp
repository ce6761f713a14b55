#pragma once
// The README.md every reference set carries (DESIGN.md): what is inside and how to load and verify
// it with numpy. Written by `validate generate` and again by `validate merge` for the merged set,
// so both say the same; it lives here, not in the generator, so merging needs no LibTorch.
#include <cstdint>
#include <string>
#include <vector>

#include "validate/cases/case.hpp"

namespace validate::cases {

// `origin` completes "N case(s) from ...": "`cases/default.json`", or "3 shards merged by
// `validate merge`". `cases` in set order; `fill` is "random" or "exact".
std::string set_readme(const std::vector<Case>& cases, const std::string& origin,
                       std::uint64_t seed, const std::string& fill);

}  // namespace validate::cases
