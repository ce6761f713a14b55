#pragma once
// What a run says about each case: `<dtype>/<case>_run.json` of a validate-run/1 directory
// (docs/formats.md). One typed record, one to_json and one from_json, used by `run` (which writes
// it) and `compare` (which reads it), so neither side speaks a protocol the other must guess: the
// outcome is an enum, not a message prefix; runner notes are fields, not `info` keys found by
// their suffix. The JSON is unchanged from 0.1 (same keys, same bytes).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "validate/cases/case.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/result.hpp"

namespace validate::cases {

enum class Outcome { ok, error, skipped, unsupported };
const char* outcome_name(Outcome o);
std::optional<Outcome> outcome_from_name(const std::string& s);

// What a runner says about one op beyond its results. The typed notes are the ones another
// component acts on; `extra` is backend detail for people (algorithms, descriptors, timings).
// On disk they all live in the op's "info" object.
struct RunnerNotes {
  // Results the runner did not ask its stack for (an exec layout file that leaves the gradients
  // out): compare says "not requested", not "not run" ("info.not_requested").
  // Absent: the runner asks for everything (only exec writes the list, empty when nothing is left out).
  std::optional<std::vector<std::string>> not_requested;
  // Results the layout file does not name that the program wrote anyway (an exec gradient): tensor ->
  // the spec they were read in, the one the file's base preset gives ("info.unnamed_results").
  // They are checked like every result; compare warns that their layout was never declared.
  std::map<std::string, std::string> unnamed_results;
  // --repeat: whether every rerun was bitwise identical, and the tensors that were not.
  std::optional<bool> bitwise_deterministic;
  std::vector<std::string> nondeterministic_tensors;
  // How a tensor reached the backend: "activation" -> "native" | "strided" | "converted"
  // ("info.activation_path"), gathered per op into run_info.json "paths".
  std::map<std::string, std::string> paths;
  // The algorithm that computed each result ("info.algorithms": tensor -> name, the names of
  // validate/cases/algorithm.hpp); a tensor not listed was computed by the direct sum. compare
  // bounds each tensor's error by its algorithm's model.
  std::map<std::string, std::string> algorithms;
  Json extra = Json::object();
};

struct OpRunRecord {
  Outcome outcome = Outcome::ok;
  std::string message;  // why it failed or was skipped; the program's stderr for exec
  std::vector<std::string> produced;  // result tensors written beside the record
  // Tensor -> sha256 of what the backend consumed; absent in records of runs that did not say.
  std::optional<std::map<std::string, std::string>> input_hashes;
  // Tensor -> declared layout spec, from the run's layout set (absent when the set has no entry).
  std::optional<std::map<std::string, std::string>> layouts;
  RunnerNotes notes;
  double elapsed_s = 0;
};

struct CaseRunRecord {
  std::string case_name, dtype;
  std::map<Op, OpRunRecord> ops;
};

Json to_json(const RunnerNotes& n);
Json to_json(const OpRunRecord& r);
Json to_json(const CaseRunRecord& r);
RunnerNotes notes_from_json(const Json& info);
// `path` names the file in every error (exit 2): not an object, no "ops", an op this harness
// does not know, an outcome that is not one of the four, ok without "produced".
Result<CaseRunRecord> case_record_from_json(const Json& j, const std::string& path);

}  // namespace validate::cases
