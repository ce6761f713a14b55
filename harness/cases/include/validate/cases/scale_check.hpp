#pragma once
// Whether a reference set's error-bound scales can be what generate stored (docs/formats.md,
// "scales"; docs/compare.md, "Error bounds"). A scale widens every bound made from it, so a scale
// raised by hand (unit_log2 + 20) would pass a run 1% off; a NaN, infinite, negative or zero one
// would fail a correct run and blame the program. verify and compare both hold a set to these checks:
//
// - format: a set is of one format as a whole, every output and gradient with a scale or none
//   (checkpoints likewise), every gradient of one quantity;
// - each scale: its quantity the one its role takes, float16 with unit_log2 or float32, the
//   tensor's shape, every value finite and >= 0, at most its a-priori ceiling and at least the
//   floor its own reference element puts under it (ScaleLimit).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "validate/cases/refset.hpp"
#include "validate/core/dtype.hpp"
#include "validate/core/result.hpp"

namespace validate::cases {

// What generate's scale of one tensor can be, from the case's own tensors. rho = sqrt(sum (a_i
// b_i)^2) over at most n products is at most sqrt(n) max|a| max|b| (a gradient's dL/dy factor
// widened as generate widens it); and |y| = |sum a_i b_i| <= sqrt(n) rho, so rho >= |y| / sqrt(n).
struct ScaleLimit {
  double n = 1;                  // at most this many products summed into one element
  std::optional<double> ceiling;  // none: no a-priori ceiling (checkpoints, training cases)
  bool floor = true;              // false: not a root-sum-square of the reference's products
};

// The limits of the scales of `op` of a case (keyed by tensor name), reading its inputs, output
// and target from the set. Errors name the file that could not be read.
Result<std::map<std::string, ScaleLimit>> scale_limits(const RefCase& rc, Op op);

// Values as stored in a .npy data section (float32 or float16; float64 for completeness).
struct StoredValues {
  const void* data = nullptr;
  DType storage = DType::float32;
  std::int64_t numel = 0;
};
// What is wrong with a scale's values (each times `unit`), if anything, against its limit and
// the reference tensor it scales ("" when nothing). The message names the first bad element and
// what it breaks.
std::string check_scale_values(const StoredValues& scale, double unit, const StoredValues& ref,
                               const ScaleLimit& limit);

// The quantities a scale of a tensor of `role` may be listed as (the first: what generate writes).
std::vector<std::string> scale_quantities(Role role);

// The format check over every case of a set (`set_dir` names it in messages): one line per
// problem, empty when the set is of one format.
std::vector<std::string> check_scale_format(const std::vector<RefCase>& cases);

// A set whose gradient scales are all of the older kind ("rss_products", before the split
// gradient bound) is consistent, but its gradients are held to the looser bound that kind allows:
// the first such scale's name, for a notice in every report ("" when none).
std::string older_gradient_scale(const std::vector<RefCase>& cases);

// Every check above on the scales of one case (verify): one line per problem, naming the file.
std::vector<std::string> check_case_scales(const RefCase& rc);

}  // namespace validate::cases
