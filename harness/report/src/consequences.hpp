#pragma once
// Internal to the reporters: the failures folded under another entry (Diagnosis::follows_from),
// split by whether that entry names a mistake. A trajectory's later checkpoints follow from its
// first bad checkpoint whether or not any hypothesis explains it, so "follow from the mistakes
// named above" is only true of the first kind.
#include <cstddef>
#include <string>

#include <fmt/format.h>

#include "format.hpp"

namespace validate::report::detail {

struct ConsequenceCounts {
  std::size_t after_named = 0;    // the entry they follow from names a mistake
  std::size_t after_unnamed = 0;  // it does not (or is not in the report)
  std::size_t total() const { return after_named + after_unnamed; }
};

inline bool follows_a_named_mistake(const compare::Report& r, const compare::Entry& e) {
  for (const auto& c : r.entries)
    if (c.tensor == e.diagnosis->follows_from && c.case_name == e.case_name && c.dtype == e.dtype &&
        c.variant == e.variant && c.op_name() == e.op_name())
      return c.diagnosis && c.diagnosis->named();
  return false;
}

inline ConsequenceCounts consequence_counts(const compare::Report& r) {
  ConsequenceCounts n;
  for (const auto& e : r.entries)
    if (is_consequence(e)) ++(follows_a_named_mistake(r, e) ? n.after_named : n.after_unnamed);
  return n;
}

// "3 failures that follow from the mistakes named above", "2 failures that follow from an earlier
// failure no mistake was named for", or both joined with "and".
inline std::string consequences_phrase(const ConsequenceCounts& n) {
  auto failures = [](std::size_t k) { return fmt::format("{} failure{}", k, k == 1 ? "" : "s"); };
  auto verb = [](std::size_t k) { return k == 1 ? "follows" : "follow"; };
  const std::string unnamed = "from an earlier failure above that no mistake was named for";
  if (n.after_unnamed == 0)
    return fmt::format("{} that {} from the mistakes named above", failures(n.after_named), verb(n.after_named));
  if (n.after_named == 0)
    return fmt::format("{} that {} {}", failures(n.after_unnamed), verb(n.after_unnamed), unnamed);
  return fmt::format("{} that {} from the mistakes named above and {} that {} {}", failures(n.after_named),
                     verb(n.after_named), n.after_unnamed, verb(n.after_unnamed), unnamed);
}

}  // namespace validate::report::detail
