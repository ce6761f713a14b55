#pragma once
// Reading and writing reference sets (`validate-reference/1`) and run directories
// (`validate-run/1`): per-case metadata, the manifest, and locating tensors. See docs/formats.md.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "validate/cases/case.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/result.hpp"
#include "validate/core/tensor.hpp"

namespace validate::cases {

inline constexpr const char* kReferenceFormat = "validate-reference/1";
// The "quantity" of a scale listed under ops.<op>.scales: the root-sum-square of an output's or a
// gradient's products, or a training checkpoint's two-stack bound per unit lambda and per side.
inline constexpr const char* kCheckpointBoundQuantity = "checkpoint_bound_per_lambda";
// A gradient's error-bound scale S = sqrt(n (u/u_d)^2 rho_a^2 + rho_p^2) (metrics/bounds.hpp,
// BoundOptions::split_gradient); sets of earlier versions list rho_p alone as "rss_products", as
// outputs still do.
inline constexpr const char* kGradientBoundQuantity = "rss_gradient_terms";
// A bfloat16/float16 gradient's stored dL/dy choice term Z (ops.<op>.scales.<grad>.choice): the
// gradient's move between dL/dy kept and rounded, plus the rare flips' root term at lambda 8
// (metrics/bounds.hpp, BoundOptions::choice; docs/compare.md).
inline constexpr const char* kChoiceQuantity = "dy_choice_two_stack";
// A bfloat16/float16 output's stored bias-after term W (ops.<op>.scales.output.choice, ops whose
// bias may be added after the stored sum): the other route's stored output against the
// reference's, plus the rare flips of round(sum) (metrics/bounds.hpp, BoundOptions::after).
inline constexpr const char* kBiasAfterQuantity = "bias_after_two_stack";
// An op with a user's tensor has its scales widened by the measured partial sums of its sums
// (ops.<op>.scales.<tensor>.partial_sums: the chunks per nesting; docs/compare.md, "Partial sums on
// the data at hand"), and no dL/dy choice term.
inline constexpr int kPartialSumChunks = 32;
// Whether tensor t's scale entry carries that mark (every output and gradient of such an op; a
// training checkpoint's bound does not measure partial sums), and the mark itself.
inline bool has_partial_sums(const Case& c, Op op, const TensorInfo& t) {
  return t.role != Role::checkpoint && c.has_user_tensor(op);
}
inline Json partial_sums_mark() { return Json{{"chunks", kPartialSumChunks}}; }
inline constexpr const char* kRunFormat = "validate-run/1";

struct TensorRecord {
  std::string sha256;  // tensor hash: values as little-endian float32, C order
  DType storage = DType::float32;
  // max |value| over the non-NaN elements, when finite. Written into the metadata of results so
  // `compare` gets its near-zero floor without a pre-pass over every reference tensor.
  std::optional<double> max_abs;
  // An error-bound scale stored as float16 times 2^unit_log2 (docs/formats.md, "scales"); its
  // sha256 is then that of the file's data section, as stored.
  std::optional<int> unit_log2;
};

// The `<case>_metadata.json` document (docs/formats.md) for one case (both ops).
Json case_metadata(const Case& c, const std::map<std::string, TensorRecord>& records_by_file);

// Rebuilds a Case (geometry, dtype, name) from its metadata document.
Result<Case> case_from_metadata(const Json& meta, const std::string& where);

struct RefCase {
  Case c;
  Json metadata;
  std::string dtype_dir;  // absolute or relative path of <set>/<dtype>
};

// Every case of a set, ordered by dtype then name: only the `<dtype>/<case>_metadata.json` files the
// manifest lists (a set is exactly what its manifest lists), each checked to name its tensors by
// their canonical file names, all listed in the manifest. Fails (naming the file) on unreadable
// metadata, or reads the manifest first and fails when it is missing.
Result<std::vector<RefCase>> load_cases(const std::string& set_dir);
// The same with the manifest already read. With `problems`, a case whose (well-formed) metadata
// names unlisted or non-canonical files is reported there and skipped instead of failing the whole
// load (verify: one such case never hides the others); malformed metadata is always an error.
Result<std::vector<RefCase>> load_cases(const std::string& set_dir, const Json& manifest,
                                        std::vector<std::string>* problems);

// The metadata entry of one tensor (ops.<op>.tensors.<name>), or null when absent or not an object.
const Json* metadata_tensor(const Json& meta, Op op, const std::string& tensor);
// Expected input hash from metadata (ops.<op>.tensors.<name>.sha256); "" when absent.
std::string metadata_hash(const Json& meta, Op op, const std::string& tensor);

struct ManifestEntry {
  std::uint64_t size = 0;
  std::string sha256;  // of the whole file
};
using FileMap = std::map<std::string, ManifestEntry>;  // relative path -> entry

// Writes manifest.json last: format, generator version + commit, created_at, extra fields, files.
Status write_manifest(const std::string& set_dir, const std::string& format, const FileMap& files,
                      const Json& extra = Json::object());
Result<Json> read_manifest(const std::string& set_dir);  // error if missing: the set is incomplete
// What read_manifest checks before anyone walks a manifest written by others: an object whose
// "format" (if any) is a string and whose "files" maps names that stay inside the set (fs::join_inside)
// to {"sha256": string, "size": unsigned}. `where` (the manifest's path) starts every message.
Status check_manifest(const Json& manifest, const std::string& where);

// Hashes every regular file under set_dir except manifest.json (for sets written by parts).
Result<FileMap> hash_tree(const std::string& set_dir);

}  // namespace validate::cases
