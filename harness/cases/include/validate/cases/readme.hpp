#pragma once
// The README.md every reference set carries (docs/formats.md): what is inside and how to load and verify
// it with numpy. Written by `validate generate` and again by `validate merge` for the merged set,
// so both say the same; it lives here, not in the generator, so merging needs no LibTorch.
#include <cstdint>
#include <string>
#include <vector>

#include "validate/cases/case.hpp"

namespace validate::cases {

// One case as `list` and the README's table show it: its first op's K and first two inputs (a
// conv's input and weight), and the shapes of the matmul it carries ("-" where there is none).
struct CaseSummary {
  std::int64_t k = 0;
  std::string first_input, second_input, matmul_a, matmul_b;
};
CaseSummary summarize(const Case& c);

// `origin` completes "N case(s) from ...": "`cases/default.json`", or "3 shards merged by
// `validate merge`". `cases` in set order; `fill` is "random" or "exact".
std::string set_readme(const std::vector<Case>& cases, const std::string& origin,
                       std::uint64_t seed, const std::string& fill);

}  // namespace validate::cases
