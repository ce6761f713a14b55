#pragma once
// A diagnosis that names one mistake checked on every element (the checkpoint checks of
// trajectory_checkpoint.cpp and trajectory_own_update.cpp): the hypothesis as the only match, its
// sentence "<description> — <cause>? Fix: <fix>."
#include <cstdint>
#include <utility>

#include "validate/diagnosis/diagnosis.hpp"

namespace validate::compare::detail {

inline Diagnosis named_on_every_element(Hypothesis h, std::int64_t checked) {
  h.checked = checked;
  h.beyond = 0;
  h.passes = true;
  h.confirmed_all = true;
  Diagnosis dx;
  dx.summary = h.description + " — " + h.cause + "? Fix: " + h.fix + ".";
  dx.families = {h.family};
  dx.tried = 1;
  dx.matches.push_back(std::move(h));
  return dx;
}

}  // namespace validate::compare::detail
