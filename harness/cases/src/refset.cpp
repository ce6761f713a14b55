#include "validate/cases/refset.hpp"

#include <algorithm>
#include <filesystem>

#include "validate/core/fs.hpp"
#include "validate/core/sha256.hpp"
#include "validate/core/version.hpp"
#include "validate/ops/registry.hpp"

namespace validate::cases {

namespace stdfs = std::filesystem;

Json case_metadata(const Case& c, const std::map<std::string, TensorRecord>& records) {
  Json meta;
  meta["format"] = kReferenceFormat;
  meta["case"] = c.name;
  meta["dtype"] = dtype_name(c.dtype);
  meta["storage_dtype"] = dtype_name(storage_dtype(c.dtype));
  for (const OpInstance& inst : c.ops) {
    const Op op = inst.op();
    const ops::OpDef& def = ops::find(op);
    const char* on = def.name();
    Json opj;
    opj["params"] = def.metadata_params(inst.params);
    opj["K"] = def.reduction_length(inst.params);
    opj["loss"] = "mse";
    Json tensors = Json::object();
    for (const auto& t : c.tensors(op)) {
      std::string file = c.file_name(op, t.name);
      Json tj = {{"file", file}, {"shape", t.shape}, {"layout", t.canonical_axes.empty() ? "scalar" : t.canonical_axes},
                 {"role", role_name(t.role)}};
      DType storage = c.storage(t);
      auto it = records.find(file);
      if (it != records.end()) {
        tj["sha256"] = it->second.sha256;
        storage = it->second.storage;
        if (t.role != Role::input && it->second.max_abs) tj["max_abs"] = *it->second.max_abs;
      }
      tensors[t.name] = tj;
      meta["shapes"][on][t.name] = t.shape;
      meta["dtypes"][on][t.name] = dtype_name(storage);
      if (t.role == Role::input && it != records.end()) meta["input_hashes"][on][t.name] = it->second.sha256;
    }
    opj["tensors"] = tensors;
    // Error-bound scales (docs/compare.md, "Error bounds"): one file per output and gradient,
    // float16 times 2^unit_log2 (sets of an earlier version: float32), listed here and in the
    // manifest; sets made before scales have none. A training checkpoint's is its bound per unit
    // lambda ("Checkpoint bounds"), another quantity.
    Json scales = Json::object();
    for (const auto& t : c.tensors(op)) {
      if (!c.has_bound_scale(t)) continue;
      const std::string file = c.file_name(op, t.name + "_scale");
      auto it = records.find(file);
      if (it == records.end()) continue;
      scales[t.name] = {{"file", file}, {"sha256", it->second.sha256},
                        {"quantity", t.role == Role::checkpoint ? kCheckpointBoundQuantity
                                     : t.role == Role::grad     ? kGradientBoundQuantity
                                                                : "rss_products"}};
      if (it->second.unit_log2) scales[t.name]["unit_log2"] = *it->second.unit_log2;
      if (has_partial_sums(c, op, t)) scales[t.name]["partial_sums"] = partial_sums_mark();
      if (auto ch = records.find(c.file_name(op, t.name + "_choice")); ch != records.end()) {
        Json cj = {{"file", ch->first},
                   {"sha256", ch->second.sha256},
                   {"quantity", t.role == Role::output ? kBiasAfterQuantity : kChoiceQuantity}};
        if (ch->second.unit_log2) cj["unit_log2"] = *ch->second.unit_log2;
        scales[t.name]["choice"] = cj;
      }
    }
    if (!scales.empty()) opj["scales"] = scales;
    meta["ops"][on] = opj;
  }
  if (c.train) meta["train"] = train::to_json(*c.train);
  // Only a case that names distributions: every other set's metadata stays byte for byte as it was.
  if (!c.input_dists.empty()) meta["inputs"] = input_dists_json(c.input_dists);
  return meta;
}

Result<Case> case_from_metadata(const Json& meta, const std::string& where) {
  try {
    if (!meta.is_object()) return Error{where + ": metadata must be a JSON object"};
    if (meta.value("format", "") != kReferenceFormat)
      return Error{where + ": format is not \"" + std::string(kReferenceFormat) + "\""};
    Case c;
    c.name = meta.at("case").get<std::string>();
    // The name becomes file names (<case>_<op>_<tensor>.npy) under the set: no "../", no "/".
    VALIDATE_TRY(check_case_name(c.name, where));
    auto dt = parse_dtype(meta.at("dtype").get<std::string>());
    if (!dt) return Error{where + ": unknown dtype '" + meta.at("dtype").get<std::string>() + "'"};
    c.dtype = *dt;
    const Json& ops_json = meta.at("ops");
    if (!ops_json.is_object()) return Error{where + ": \"ops\" must be an object"};
    // Every op the metadata holds, in registry order (conv2d before its im2col matmul, as written).
    for (const ops::OpDef* def : ops::registry()) {
      if (!ops_json.contains(def->name())) continue;
      auto p = def->from_metadata(ops_json.at(def->name()), where);
      if (!p) return p.status();
      c.ops.push_back(OpInstance{std::move(*p)});
    }
    for (auto it = ops_json.begin(); it != ops_json.end(); ++it)
      if (!ops::find(it.key())) return Error{where + ": unknown op '" + it.key() + "' in \"ops\""};
    if (meta.contains("train")) {
      auto t = train::read_train_config(meta.at("train"), where);
      if (!t) return t.status();
      c.train = *t;
    }
    if (meta.contains("inputs")) {
      auto d = parse_input_dists(meta.at("inputs"), where, /*metadata=*/true);
      if (!d) return d.status();
      c.input_dists = std::move(*d);
      VALIDATE_TRY(check_input_dists(c, where));
    }
    return c;
  } catch (const nlohmann::json::exception& e) {
    return Error{where + ": malformed metadata (" + std::string(e.what()) + ")"};
  }
}

const Json* metadata_tensor(const Json& meta, Op op, const std::string& tensor) {
  const Json* p = &meta;
  for (const char* k : {"ops", op_name(op), "tensors", tensor.c_str()}) {
    if (!p->is_object()) return nullptr;
    auto it = p->find(k);
    if (it == p->end()) return nullptr;
    p = &*it;
  }
  return p->is_object() ? p : nullptr;
}

std::string metadata_hash(const Json& meta, Op op, const std::string& tensor) {
  const Json* t = metadata_tensor(meta, op, tensor);
  if (!t) return "";
  auto it = t->find("sha256");
  return it != t->end() && it->is_string() ? it->get<std::string>() : "";
}

namespace {

// "float32/k0072_ic008_metadata.json" -> ("float32", "k0072_ic008"); false for anything else.
bool metadata_entry(const std::string& rel, std::string& dtype, std::string& name) {
  static const std::string suffix = "_metadata.json";
  const auto slash = rel.find('/');
  if (slash == std::string::npos || rel.find('/', slash + 1) != std::string::npos) return false;
  if (rel.size() <= slash + 1 + suffix.size() || rel.compare(rel.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  dtype = rel.substr(0, slash);
  name = rel.substr(slash + 1, rel.size() - slash - 1 - suffix.size());
  return dtype == "float32" || dtype == "bfloat16" || dtype == "float16";
}

// The files a case's metadata refers to: each must be the canonical `<case>_<op>_<tensor>.npy` (a
// `tensors.<t>.file` of "../x" or "/etc/x" with matching hashes used to verify and be opened) and
// listed in the manifest (a set is exactly what its manifest lists).
Status check_case_files(const RefCase& rc, const Json& files, const std::string& where) {
  for (const OpInstance& inst : rc.c.ops) {
    const Op op = inst.op();
    for (const auto& t : rc.c.tensors(op)) {
      const std::string want = rc.c.file_name(op, t.name);
      if (const Json* tj = metadata_tensor(rc.metadata, op, t.name)) {
        if (tj->contains("file") && (!(*tj)["file"].is_string() || (*tj)["file"].get<std::string>() != want))
          return Error{where + ": ops." + op_name(op) + ".tensors." + t.name + ".file is " + json_text((*tj)["file"]) +
                       ", but a set names it \"" + want + "\" (every file of a set is a plain name inside it)"};
      }
      const std::string rel = std::string(dtype_name(rc.c.dtype)) + "/" + want;
      if (!files.contains(rel))
        return Error{where + ": tensor '" + t.name + "' of " + op_name(op) + " is " + rel +
                     ", which the set's manifest does not list (a set is exactly what its manifest lists)"};
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::vector<RefCase>> load_cases(const std::string& set_dir) {
  auto manifest = read_manifest(set_dir);
  if (!manifest) return manifest.status();
  return load_cases(set_dir, *manifest, nullptr);
}

Result<std::vector<RefCase>> load_cases(const std::string& set_dir, const Json& manifest,
                                        std::vector<std::string>* problems) {
  std::error_code ec;
  if (!stdfs::is_directory(set_dir, ec)) return Error{set_dir + ": not a directory"};
  const Json& files = manifest.at("files");
  std::vector<RefCase> out;
  for (const char* d : {"float32", "bfloat16", "float16"}) {
    // Only metadata the manifest lists: a stale <case>_metadata.json left in the directory by an
    // earlier generate is never read (it used to be listed, run and compared).
    std::vector<std::string> names;
    for (const auto& [rel, entry] : files.items()) {
      std::string dtype, name;
      if (metadata_entry(rel, dtype, name) && dtype == d) names.push_back(rel);
    }
    std::sort(names.begin(), names.end());
    const std::string dir = (stdfs::path(set_dir) / d).string();
    for (const auto& rel : names) {
      const std::string f = (stdfs::path(set_dir) / rel).string();
      // Malformed metadata cannot be checked at all (exit 2 everywhere).
      auto j = read_json(f);
      if (!j) return j.status();
      auto c = case_from_metadata(*j, f);
      if (!c) return c.status();
      if (std::string(dtype_name(c->dtype)) != d)
        return Error{f + ": dtype '" + std::string(dtype_name(c->dtype)) + "' does not match its folder " + d};
      if (rel != std::string(d) + "/" + c->name + "_metadata.json")
        return Error{f + ": \"case\" is \"" + c->name + "\" but the file is named for another case"};
      RefCase rc{std::move(*c), std::move(*j), dir};
      // Well-formed metadata that points at unlisted or oddly named files: a mismatch of the set.
      if (Status st = check_case_files(rc, files, f); !st) {
        if (!problems) return st;
        problems->push_back(st.message());
        continue;
      }
      out.push_back(std::move(rc));
    }
  }
  return out;
}

Status write_manifest(const std::string& set_dir, const std::string& format, const FileMap& files, const Json& extra) {
  Json m = extra.is_object() ? extra : Json::object();
  m["format"] = format;
  m["generator"] = {{"name", "validate"}, {"version", harness_version()}, {"git_commit", harness_git_commit()}};
  m["created_at"] = utc_timestamp();
  Json fj = Json::object();
  for (auto& [k, v] : files) fj[k] = {{"size", v.size}, {"sha256", v.sha256}};
  m["files"] = fj;
  return write_json((stdfs::path(set_dir) / "manifest.json").string(), m);
}

Result<Json> read_manifest(const std::string& set_dir) {
  std::string path = (stdfs::path(set_dir) / "manifest.json").string();
  if (!fs::exists(path))
    return Error{path + " is missing: the set is incomplete (the manifest is written last)"};
  auto j = read_json(path);
  if (!j) return j.status();
  VALIDATE_TRY(check_manifest(*j, path));
  return j;
}

Status check_manifest(const Json& m, const std::string& where) {
  if (!m.is_object() || !m.contains("files") || !m["files"].is_object())
    return Error{where + ": no \"files\" object"};
  if (m.contains("format") && !m["format"].is_string()) return Error{where + ": \"format\" is not a string"};
  // A set or run always lists its own description files; an empty list "verified" as
  // "0 files checked" and proved nothing.
  if (m["files"].empty()) return Error{where + ": \"files\" lists nothing: there is nothing to check"};
  // Every reader (verify, list, merge, compare, run) walks these entries; check them once here so
  // none of them meets a non-object entry or a name that leaves the set ("../x", "/etc/x", NUL).
  for (const auto& [rel, e] : m["files"].items()) {
    auto inside = fs::join_inside(".", rel);
    if (!inside) return Error{where + ": file '" + rel + "': " + inside.message()};
    if (!e.is_object() || !e.contains("sha256") || !e["sha256"].is_string())
      return Error{where + ": entry '" + rel + "' has no sha256 string"};
    if (e.contains("size") && !e["size"].is_number_unsigned())
      return Error{where + ": entry '" + rel + "': \"size\" is not a non-negative integer"};
  }
  return Status::ok();
}

Result<FileMap> hash_tree(const std::string& set_dir) {
  FileMap out;
  std::error_code ec;
  for (auto it = stdfs::recursive_directory_iterator(set_dir, ec); it != stdfs::recursive_directory_iterator(); ++it) {
    if (!it->is_regular_file()) continue;
    std::string rel = stdfs::relative(it->path(), set_dir).generic_string();
    if (rel == "manifest.json" || rel.find(".tmp.") != std::string::npos) continue;
    auto h = sha256_file(it->path().string());
    if (!h) return h.status();
    out[rel] = {static_cast<std::uint64_t>(it->file_size()), *h};
  }
  if (ec) return Error{set_dir + ": " + ec.message()};
  return out;
}

}  // namespace validate::cases
