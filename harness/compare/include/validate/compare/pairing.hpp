#pragma once
// Reading a run directory (validate-run/1, docs/formats.md) and pairing what it declares with the
// reference set: every tensor listed in a case's "produced" is paired by dtype, case, op and name;
// reference tensors nobody declared are "not run", never "passed".
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "validate/cases/refset.hpp"
#include "validate/cases/run_record.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/result.hpp"

namespace validate::compare {

// A case's record as the run wrote it (cases/run_record.hpp) and the file it came from.
struct RunCaseRecord : cases::CaseRunRecord {
  std::string path;  // <dtype>/<case>_run.json
  const cases::OpRunRecord* op(cases::Op o) const {
    auto it = ops.find(o);
    return it == ops.end() ? nullptr : &it->second;
  }
};

struct RunDirectory {
  std::string root;
  std::string label;  // the variant's name; "" for the run itself
  Json files = Json::object();  // manifest.json "files": what the run consists of, with hashes
  Json run_info = Json::object();
  std::map<std::string, RunCaseRecord> cases;  // "dtype/case" -> record
};

// The run itself (when it holds cases) and every variants/<v>/ run its manifest lists. Only files
// the manifest lists are read, each JSON file after its hash matched. Errors (exit 2): no
// manifest.json (an incomplete run), unreadable, tampered or malformed run_info.json /
// <case>_run.json.
Result<std::vector<RunDirectory>> load_run(const std::string& dir);
Result<RunDirectory> load_run_directory(const std::string& dir, const std::string& label);

struct PairItem {
  enum class Kind {
    tensor,      // declared and in the reference: compare the files
    not_run,     // in the reference, not declared (or the case/op is absent from the run)
    not_requested,  // in the reference, and the run says it did not ask for it (info.not_requested)
    op_outcome,  // the op's outcome is error/skipped/unsupported: one entry for the op
    input_hash,  // the run consumed different inputs (or did not record them)
    unknown,     // the run declares a tensor or case the reference does not have
  };
  Kind kind = Kind::tensor;
  std::string dtype, case_name, tensor;  // tensor "" for op-level items
  std::optional<cases::Op> op;           // none for a case the reference does not have
  cases::Outcome outcome = cases::Outcome::ok;  // kind op_outcome: error, skipped or unsupported
  const cases::RefCase* ref = nullptr;       // null for unknown cases
  const RunCaseRecord* run = nullptr;
  std::string ref_file, run_file;  // paths of the two .npy files (kind tensor)
  std::string run_rel;             // run_file relative to the run directory (its manifest key)
  std::string message;
};

// Error unless `rel` is listed in the run's manifest with the sha256 of these bytes: a run file
// edited or swapped after the run fails as tampering, named.
Status check_listed_bytes(const RunDirectory& run, const std::string& rel, const void* data,
                          std::size_t size);
// The same check of bytes whose SHA-256 (lower-case hex) is already known.
Status check_listed_digest(const RunDirectory& run, const std::string& rel, const std::string& sha256);

// The SHA-256 the reference's metadata holds for input `name` of `op` (the tensor's own hash, else
// input_hashes), "" when it holds none and so cannot prove what a run consumed.
std::string reference_input_hash(const Json& metadata, cases::Op op, const std::string& name);
// The hash a run (or oracle) recorded for input `name` of an op, nullptr when it recorded none.
const std::string* recorded_input_hash(const cases::OpRunRecord& opr, const std::string& name);

// Pure: reads no tensor data. Items in reference order (dtype, case, op, tensor).
std::vector<PairItem> pair_run(const std::vector<cases::RefCase>& ref, const RunDirectory& run);

}  // namespace validate::compare
