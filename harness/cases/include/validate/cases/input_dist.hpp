#pragma once
// What a case's inputs are drawn from (docs/cli.md, "Input distributions"): a case file's
// "inputs" maps a tensor name ("input", "weight", or "<op>.<tensor>" for one op's tensor alone) to
// a distribution. A tensor with no entry gets today's fill (normal), so existing case files and
// sets are unchanged. Recorded in each case's metadata and config.json's expanded_cases, and read
// back from there (a training run draws its later batches from it).
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "validate/core/json_io.hpp"
#include "validate/core/result.hpp"
#include "validate/core/tensor.hpp"

namespace validate::cases {

enum class Dist { normal, relu_normal, log_uniform, student_t, sparse, npy };

struct InputDist {
  Dist dist = Dist::normal;
  std::optional<double> scale;  // replaces the tensor's own (1; weights 1/sqrt(K); bias 0.1)
  double zeros = 0;             // fraction of elements set to exactly 0, on top of any dist
  int sign = 0;                 // 0: the dist's own; +1: |x|; -1: -|x|
  double decades = 3;           // log_uniform: |x| in (scale 10^-decades, scale]
  double dof = 3;               // student_t: degrees of freedom nu
  std::string file;             // npy: as the case file names it (relative to the case file)
  std::string sha256;           // npy: of the whole file
  // npy: the file's values (its own dtype), read by load_input_files; shared by the case's copies.
  std::shared_ptr<const Tensor> data;

  // Draws nothing beyond today's normal fill (so the tensor's bytes are today's).
  bool is_default() const;
};

// Tensor name (or "<op>.<tensor>") -> its distribution.
using InputDists = std::map<std::string, InputDist>;

// Reads an "inputs" object. `metadata`: as recorded in a set ("sha256" required for npy entries);
// a case file may give "sha256" too, which the file must then match.
Result<InputDists> parse_input_dists(const Json& j, const std::string& where, bool metadata = false);
// What the set records: every entry as parsed, defaults filled in, with the npy file's sha256.
Json input_dists_json(const InputDists& d);
// One line for `validate list`: "input relu_normal; weight log_uniform decades=4 sign=positive".
std::string describe(const InputDists& d);
std::string describe(const InputDist& d);

}  // namespace validate::cases
