#include "validate/cases/refset.hpp"

#include <algorithm>
#include <filesystem>

#include "validate/core/fs.hpp"
#include "validate/core/sha256.hpp"
#include "validate/core/version.hpp"

namespace validate::cases {

namespace stdfs = std::filesystem;

Json case_metadata(const Case& c, const std::map<std::string, TensorRecord>& records) {
  Json meta;
  meta["format"] = kReferenceFormat;
  meta["case"] = c.name;
  meta["dtype"] = dtype_name(c.dtype);
  meta["storage_dtype"] = dtype_name(storage_dtype(c.dtype));
  for (Op op : {Op::conv2d, Op::matmul}) {
    if ((op == Op::conv2d && !c.has_conv) || (op == Op::matmul && !c.has_matmul)) continue;
    const char* on = op_name(op);
    Json opj;
    if (op == Op::conv2d) {
      const auto& p = c.conv;
      opj["params"] = {{"stride", {p.stride[0], p.stride[1]}},
                       {"padding", {p.padding[0], p.padding[1]}},
                       {"dilation", {p.dilation[0], p.dilation[1]}},
                       {"groups", p.groups},
                       {"bias", p.bias}};
      opj["K"] = p.k();
    } else {
      opj["params"] = {{"M", c.matmul.m}, {"K", c.matmul.k}, {"N", c.matmul.n}};
      opj["K"] = c.matmul.k;
    }
    opj["loss"] = "mse";
    Json tensors = Json::object();
    for (const auto& t : c.tensors(op)) {
      std::string file = c.file_name(op, t.name);
      Json tj = {{"file", file}, {"shape", t.shape}, {"layout", t.canonical_axes.empty() ? "scalar" : t.canonical_axes},
                 {"role", role_name(t.role)}};
      DType storage = t.role == Role::loss ? DType::float32 : storage_dtype(c.dtype);
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
    meta["ops"][on] = opj;
  }
  return meta;
}

namespace {

// Integers from a metadata document. nlohmann's get<int64_t>() converts a float with a plain cast,
// undefined for 1e300 (found by fuzz_metadata), so the type is checked first.
std::vector<std::int64_t> int_list(const Json& j, std::size_t n, const char* what) {
  if (!j.is_array() || (n && j.size() != n))
    throw Json::other_error::create(501, std::string(what) + " must be a list of " + std::to_string(n) + " integers", &j);
  std::vector<std::int64_t> out;
  for (const auto& v : j) {
    if (!v.is_number_integer()) throw Json::other_error::create(501, std::string(what) + " must hold integers", &j);
    out.push_back(v.get<std::int64_t>());
  }
  return out;
}

std::int64_t int_value(const Json& j, const char* what) {
  if (!j.is_number_integer()) throw Json::other_error::create(501, std::string(what) + " must be an integer", &j);
  return j.get<std::int64_t>();
}

}  // namespace

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
    const Json& ops = meta.at("ops");
    if (!ops.is_object()) return Error{where + ": \"ops\" must be an object"};
    c.has_conv = ops.contains("conv2d");
    c.has_matmul = ops.contains("matmul");
    if (c.has_conv) {
      const Json& o = ops.at("conv2d");
      const Json& p = o.at("params");
      auto in = int_list(o.at("tensors").at("input").at("shape"), 0, "conv2d input shape");
      auto w = int_list(o.at("tensors").at("weight").at("shape"), 0, "conv2d weight shape");
      if (in.size() != 4 || w.size() != 4) return Error{where + ": conv2d input and weight must be 4-D"};
      auto& cp = c.conv;
      cp.n = in[0]; cp.c = in[1]; cp.h = in[2]; cp.w = in[3];
      cp.o = w[0]; cp.kh = w[2]; cp.kw = w[3];
      auto pair = [&](const char* key) {
        auto v = int_list(p.at(key), 2, key);
        return std::array<std::int64_t, 2>{v[0], v[1]};
      };
      cp.stride = pair("stride");
      cp.padding = pair("padding");
      cp.dilation = pair("dilation");
      cp.groups = int_value(p.at("groups"), "groups");
      cp.bias = p.at("bias").get<bool>();
      // Before anything computes an output size: a stride of 0 divided by zero in hout().
      VALIDATE_TRY(check_conv(cp, where + ": conv2d"));
      if (w[1] != cp.c / cp.groups)
        return Error{where + ": conv2d weight shape does not match input channels and groups"};
    }
    if (c.has_matmul) {
      const Json& p = ops.at("matmul").at("params");
      c.matmul = {int_value(p.at("M"), "M"), int_value(p.at("K"), "K"), int_value(p.at("N"), "N")};
      VALIDATE_TRY(check_matmul(c.matmul, where));
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
  for (Op op : {Op::conv2d, Op::matmul}) {
    if ((op == Op::conv2d && !rc.c.has_conv) || (op == Op::matmul && !rc.c.has_matmul)) continue;
    for (const auto& t : rc.c.tensors(op)) {
      const std::string want = rc.c.file_name(op, t.name);
      if (const Json* tj = metadata_tensor(rc.metadata, op, t.name)) {
        if (tj->contains("file") && (!(*tj)["file"].is_string() || (*tj)["file"].get<std::string>() != want))
          return Error{where + ": ops." + op_name(op) + ".tensors." + t.name + ".file is " + (*tj)["file"].dump() +
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
