#pragma once
// The entries of one op read together (docs/compare.md "Diagnosis"). Per-tensor diagnoses cannot
// see two facts that settle many cases:
//  - a mistake in how a result was WRITTEN leaves the loss right (the program took the loss on the
//    values it computed); a mistake in how an input was READ, or in the arithmetic, does not. So
//    when the loss failed, write hypotheses on the output are dropped in favour of read ones, and
//    when it passed, the reverse (stride 1, symmetric padding: a flip of the data instead of the
//    weights gives exactly the flipped output, and only the loss tells which it was), unless a
//    gradient of the op failed with no mistake of its own named: a written mistake leaves the
//    gradients right, so that gradient rules it out (the loss moved by less than its bound);
//  - the loss and gradients of an op whose output was computed from misread inputs are wrong too,
//    by no simple rule: they are attributed to the mistake named on the output (params
//    follows_from), not left "unexplained".
#include <vector>

#include "validate/compare/comparison.hpp"

namespace validate::compare {

void refine_op_diagnoses(std::vector<Entry>& entries);

}  // namespace validate::compare
