#pragma once
// The algorithm a run used for a tensor and the error-bound model it was judged by, as reports
// print them (docs/compare.md, "Algorithm-aware bounds").
#include <string>
#include <vector>

#include "validate/compare/comparison.hpp"

namespace validate::report::detail {

// "algorithm winograd_f4, bound model: direct + winograd F(4x4,3x3)".
inline std::string algorithm_line(const compare::Entry& e) {
  return "algorithm " + (e.algorithm.empty() ? std::string("direct") : e.algorithm) + ", bound model: " + e.bound_model;
}

// One line per tensor judged by another model than the direct sum's.
inline std::vector<std::string> algorithm_lines(const compare::Report& r) {
  std::vector<std::string> out;
  for (const auto& e : r.entries)
    if (!e.bound_model.empty() && e.bound_model != "direct")
      out.push_back((e.variant.empty() ? "" : "[" + e.variant + "] ") + e.id() + ": " + algorithm_line(e));
  return out;
}

}  // namespace validate::report::detail
