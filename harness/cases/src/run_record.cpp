#include "validate/cases/run_record.hpp"

#include <algorithm>

#include "validate/ops/registry.hpp"

namespace validate::cases {

namespace {

constexpr Outcome kOutcomes[] = {Outcome::ok, Outcome::error, Outcome::skipped, Outcome::unsupported};

// The info keys that are typed notes; everything else in "info" is backend detail (`extra`).
constexpr const char* kNotRequested = "not_requested";
constexpr const char* kUnnamedResults = "unnamed_results";
constexpr const char* kBitwise = "bitwise_deterministic";
constexpr const char* kNondeterministic = "nondeterministic_tensors";
constexpr const char* kAlgorithms = "algorithms";
constexpr const char* kPathSuffix = "_path";  // "<tensor>_path": how that tensor reached the backend

bool is_path_key(const std::string& k) {
  const std::size_t n = std::char_traits<char>::length(kPathSuffix);
  return k.size() > n && k.compare(k.size() - n, n, kPathSuffix) == 0;
}

std::vector<std::string> strings_of(const Json& a) {
  std::vector<std::string> out;
  if (a.is_array())
    for (const auto& x : a)
      if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}

}  // namespace

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::ok: return "ok";
    case Outcome::error: return "error";
    case Outcome::skipped: return "skipped";
    case Outcome::unsupported: return "unsupported";
  }
  return "?";
}

std::optional<Outcome> outcome_from_name(const std::string& s) {
  for (Outcome o : kOutcomes)
    if (s == outcome_name(o)) return o;
  return std::nullopt;
}

Json to_json(const RunnerNotes& n) {
  Json info = n.extra.is_object() ? n.extra : Json::object();
  if (n.not_requested) info[kNotRequested] = *n.not_requested;
  if (!n.unnamed_results.empty()) info[kUnnamedResults] = n.unnamed_results;
  if (n.bitwise_deterministic) {
    info[kBitwise] = *n.bitwise_deterministic;
    info[kNondeterministic] = n.nondeterministic_tensors;
  }
  for (const auto& [tensor, how] : n.paths) info[tensor + kPathSuffix] = how;
  if (!n.algorithms.empty()) info[kAlgorithms] = n.algorithms;
  return info;
}

RunnerNotes notes_from_json(const Json& info) {
  RunnerNotes n;
  if (!info.is_object()) return n;
  for (auto it = info.begin(); it != info.end(); ++it) {
    const std::string& k = it.key();
    if (k == kNotRequested && it->is_array()) {
      n.not_requested = strings_of(*it);
    } else if (k == kUnnamedResults && it->is_object()) {
      for (auto u = it->begin(); u != it->end(); ++u)
        if (u->is_string()) n.unnamed_results[u.key()] = u->get<std::string>();
    } else if (k == kBitwise && it->is_boolean()) {
      n.bitwise_deterministic = it->get<bool>();
    } else if (k == kNondeterministic && it->is_array()) {
      n.nondeterministic_tensors = strings_of(*it);
    } else if (k == kAlgorithms && it->is_object() &&
               std::all_of(it->begin(), it->end(), [](const Json& a) { return a.is_string(); })) {
      // Only {tensor: name}; a backend's own detail under the same key (per-pass objects) stays extra.
      for (auto a = it->begin(); a != it->end(); ++a) n.algorithms[a.key()] = a->get<std::string>();
    } else if (is_path_key(k) && it->is_string()) {
      n.paths[k.substr(0, k.size() - std::char_traits<char>::length(kPathSuffix))] = it->get<std::string>();
    } else {
      n.extra[k] = *it;
    }
  }
  return n;
}

Json to_json(const OpRunRecord& r) {
  Json j;
  j["outcome"] = outcome_name(r.outcome);
  j["message"] = r.message;
  if (r.input_hashes) j["input_hashes"] = *r.input_hashes;
  j["info"] = to_json(r.notes);
  j["elapsed_s"] = r.elapsed_s;
  if (r.layouts) j["layouts"] = *r.layouts;
  j["produced"] = r.produced;
  return j;
}

Json to_json(const CaseRunRecord& r) {
  Json j;
  j["case"] = r.case_name;
  j["dtype"] = r.dtype;
  j["ops"] = Json::object();
  for (const auto& [op, rec] : r.ops) j["ops"][op_name(op)] = to_json(rec);
  return j;
}

Result<CaseRunRecord> case_record_from_json(const Json& j, const std::string& path) {
  CaseRunRecord rc;
  if (!j.is_object()) return Error{path + ": not a JSON object"};
  if (!j.contains("ops") || !j["ops"].is_object()) return Error{path + ": missing \"ops\" object"};
  if (j.contains("case") && j["case"].is_string()) rc.case_name = j["case"].get<std::string>();
  if (j.contains("dtype") && j["dtype"].is_string()) rc.dtype = j["dtype"].get<std::string>();
  for (auto it = j["ops"].begin(); it != j["ops"].end(); ++it) {
    const std::string where = path + ": ops." + it.key();
    const ops::OpDef* def = ops::find(it.key());
    if (!def) return Error{where + ": \"" + it.key() + "\" is not an op this harness knows"};
    const Op op = def->id();
    const Json& o = it.value();
    if (!o.is_object()) return Error{where + " is not an object"};
    OpRunRecord r;
    if (!o.contains("outcome") || !o["outcome"].is_string()) return Error{where + ": missing \"outcome\""};
    const std::string outcome = o["outcome"].get<std::string>();
    auto parsed = outcome_from_name(outcome);
    if (!parsed) return Error{where + ": outcome \"" + outcome + "\" is not one of ok, error, skipped, unsupported"};
    r.outcome = *parsed;
    if (o.contains("message") && o["message"].is_string()) r.message = o["message"].get<std::string>();
    if (o.contains("produced")) {
      if (!o["produced"].is_array()) return Error{where + ".produced is not a list"};
      for (const auto& p : o["produced"]) {
        if (!p.is_string()) return Error{where + ".produced holds a non-string"};
        r.produced.push_back(p.get<std::string>());
      }
    } else if (r.outcome == Outcome::ok) {
      return Error{where + ": outcome ok but no \"produced\" list"};
    }
    if (o.contains("input_hashes") && o["input_hashes"].is_object()) {
      r.input_hashes.emplace();
      for (auto h = o["input_hashes"].begin(); h != o["input_hashes"].end(); ++h)
        if (h.value().is_string()) (*r.input_hashes)[h.key()] = h.value().get<std::string>();
    }
    if (o.contains("info")) r.notes = notes_from_json(o["info"]);
    if (o.contains("layouts") && o["layouts"].is_object()) {
      r.layouts.emplace();
      for (auto l = o["layouts"].begin(); l != o["layouts"].end(); ++l)
        if (l.value().is_string()) (*r.layouts)[l.key()] = l.value().get<std::string>();
    }
    if (o.contains("elapsed_s") && o["elapsed_s"].is_number()) r.elapsed_s = o["elapsed_s"].get<double>();
    rc.ops[op] = std::move(r);
  }
  return rc;
}

}  // namespace validate::cases
