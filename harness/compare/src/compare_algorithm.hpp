#pragma once
// Which algorithm computed a run's tensor (the run record's info.algorithms) and the extra term of
// its error bound (validate/metrics/algorithm_bounds.hpp; docs/compare.md, "Algorithm-aware
// bounds"). Internal to validate_compare.
#include <string>
#include <vector>

#include "validate/compare/comparison.hpp"
#include "validate/compare/pairing.hpp"
#include "validate/core/result.hpp"

namespace validate::compare::detail {

struct AlgorithmBound {
  std::string algorithm = "direct";  // as the run recorded it
  std::string model = "direct";      // the bound model applied (reports show it)
  std::vector<double> extra;         // per element, lambda times the algorithm's term; empty: none
  bool carried_output = false;       // a gradient's term carries the output's algorithm's error
};

// The direct sum (nothing to load) unless the run names another algorithm for this tensor; then
// the reference's inputs are read and the term computed on `threads` threads (0: every core). An
// unknown algorithm name is an error naming the run record.
Result<AlgorithmBound> algorithm_bound(const PairItem& it, const Entry& e, double lambda, int threads);

// The same for the op's output, from any item of the op (its loss: the output's term carried
// into the loss through dL/dy, docs/compare.md "Loss bounds").
Result<AlgorithmBound> output_algorithm_bound(const PairItem& it, double lambda, int threads);

}  // namespace validate::compare::detail
