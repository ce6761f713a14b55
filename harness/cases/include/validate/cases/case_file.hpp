#pragma once
// Case files (cases/*.json) -> the expanded list of (dtype, case) items, with --only and --shard.
//
// {
//   "format": "validate-cases/1", "seed": 42, "loss": "mse", "dtypes": ["bfloat16", "float32"],
//   "defaults": {"batch": 1, "height": 32, "width": 32, "out_channels": 32, "kernel": [3, 3],
//                "padding": [1, 1], "stride": [1, 1], "dilation": [1, 1], "groups": 1, "bias": true},
//   "sweep": {"in_channels": [8, 16, 32]},          // one case per value, named k{K:04d}_ic{ic:03d}
//   "cases": [{"name": "odd", "in_channels": 6, "height": 7, ..., "dtypes": ["float32", "float16"]},
//             {"name": "up", "op": "conv_transpose2d", "output_padding": [1, 0], ...}]
// }
// A case's "op" (default "conv2d") names a registered op (harness/ops/<op>/); its other keys are
// that op's (OpDef::case_keys). A conv2d case also holds its im2col matmul (the default pairing);
// any other op is a case of its own. "defaults" may hold any op's keys; each op takes those it knows.
// "inputs" (in "defaults" or a case; a case's entries replace the defaults' tensor by tensor):
// {"input": {"dist": "relu_normal"}, "weight": {"dist": "log_uniform", "decades": 4}, ...}, the
// distributions of input_dist.hpp.
#include <optional>
#include <string>
#include <vector>

#include "validate/cases/case.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/result.hpp"

namespace validate::cases {

// The most cases (sweep values plus "cases" entries) one case file may list: 10^4 is 600 times the
// default sweep, and a list this long is refused before any case is built.
inline constexpr std::size_t kMaxCases = 10000;

struct CaseFile {
  std::uint64_t seed = 42;
  std::string loss = "mse";
  std::vector<DType> dtypes;
  std::vector<Case> cases;  // one per geometry; dtype left at float32
  std::vector<std::vector<DType>> case_dtypes;  // per case: restriction from the file (empty = all)
  Json source;  // the file as read, for config.json
};

Result<CaseFile> parse_case_file(const Json& j, const std::string& where);
Result<CaseFile> load_case_file(const std::string& path);
// Reads every "npy" input of the file's cases (path relative to the case file at `path`): each
// must be a float .npy of exactly the shape of every tensor it is given for, finite, and match its
// "sha256" when one is given; records the file's sha256 and keeps its values for the draw.
Status load_input_files(CaseFile& f, const std::string& path);

struct Shard {
  int index = 0, count = 1;  // 0 <= index < count
};
Result<Shard> parse_shard(const std::string& text);  // "i/n", 0-based

struct Selection {
  std::vector<DType> dtypes;  // empty: the file's
  std::string only;           // RE2 regex (core/pattern.hpp) searched in "dtype/case"; empty: all
  Shard shard;
};

// Items in a stable order: dtype as listed, then case as listed. A shard takes every n-th item
// (round robin), so shards of a sweep whose cases grow in size get similar work.
Result<std::vector<Case>> expand(const CaseFile& file, const Selection& sel);

}  // namespace validate::cases
