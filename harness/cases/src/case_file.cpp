#include "validate/cases/case_file.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "validate/core/npy.hpp"
#include "validate/core/pattern.hpp"
#include "validate/core/sha256.hpp"
#include "validate/ops/registry.hpp"

namespace validate::cases {

namespace stdfs = std::filesystem;

namespace {

// The case file's own keys of a case entry; the rest are the op's (OpDef::case_keys).
const std::set<std::string> kCaseKeys = {"name", "op", "dtypes", "train", "inputs"};

// Every key any op takes: what "defaults" may hold (each op applies the ones it knows).
std::set<std::string> all_op_keys() {
  std::set<std::string> keys = kCaseKeys;
  for (const ops::OpDef* d : ops::registry())
    for (const auto& k : d->case_keys()) keys.insert(k);
  return keys;
}

// Applies the keys of `j` that `def` knows over `p`; with `strict`, any other key (beyond the case
// file's own) is an error.
Status apply_keys(const ops::OpDef& def, const Json& j, OpParams& p, const std::string& where, bool strict) {
  if (!j.is_object()) return Error{where + ": expected an object"};
  std::set<std::string> allowed = def.case_keys();
  Json mine = Json::object();
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (allowed.count(it.key())) mine[it.key()] = it.value();
    else if (strict && !kCaseKeys.count(it.key())) return Error{where + ": unknown key '" + it.key() + "'"};
  }
  return def.apply_case_keys(mine, p, where);
}

Result<std::vector<DType>> read_dtypes(const Json& j, const std::string& where) {
  std::vector<DType> out;
  if (!j.is_array()) return Error{where + ": 'dtypes' must be a list of names"};
  for (auto& d : j) {
    if (!d.is_string()) return Error{where + ": 'dtypes' must be a list of names"};
    auto t = parse_dtype(d.get<std::string>());
    if (!t || *t == DType::float64)
      return Error{where + ": unknown dtype '" + d.get<std::string>() + "' (float32, bfloat16, float16)"};
    out.push_back(*t);
  }
  return out;
}

}  // namespace

Result<CaseFile> parse_case_file(const Json& j, const std::string& where) {
  if (!j.is_object()) return Error{where + ": a case file must be a JSON object"};
  CaseFile f;
  f.source = j;
  static const std::set<std::string> top = {"format", "seed", "loss", "dtypes", "defaults", "sweep", "cases", "description"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!top.count(it.key())) return Error{where + ": unknown key '" + it.key() + "'"};
  if (j.contains("format") && j["format"] != "validate-cases/1")
    return Error{where + ": format must be \"validate-cases/1\""};
  if (j.contains("seed")) {
    if (!j["seed"].is_number_unsigned()) return Error{where + ": 'seed' must be a non-negative integer"};
    f.seed = j["seed"].get<std::uint64_t>();
  }
  if (j.contains("loss")) {
    if (j["loss"] != "mse") return Error{where + ": only \"mse\" loss is supported"};
  }
  if (j.contains("dtypes")) {
    auto d = read_dtypes(j["dtypes"], where);
    if (!d) return d.status();
    f.dtypes = *d;
  } else {
    f.dtypes = {DType::float32};
  }
  Json defaults = Json::object();
  if (j.contains("defaults")) {
    VALIDATE_TRY(ops::check_keys(j["defaults"], all_op_keys(), where + " defaults"));
    defaults = j["defaults"];
  }
  // An op's parameters for a case: its defaults, the file's "defaults" it knows, then the case's.
  auto op_params = [&](const ops::OpDef& def, const Json* cj, const std::string& at) -> Result<OpParams> {
    OpParams p = def.default_params();
    VALIDATE_TRY(apply_keys(def, defaults, p, where + " defaults", false));
    if (cj) VALIDATE_TRY(apply_keys(def, *cj, p, at, true));
    return p;
  };
  // "train" (docs/training.md): the case's own, else the file's "defaults".
  auto read_train = [&](const Json* cj, Case& c, const std::string& at) -> Status {
    const Json* tj = cj && cj->contains("train") ? &(*cj)["train"] : defaults.contains("train") ? &defaults["train"] : nullptr;
    if (!tj) return Status::ok();
    auto t = train::read_train_config(*tj, at);
    if (!t) return t.status();
    c.train = *t;
    return Status::ok();
  };
  // "inputs" (input_dist.hpp): the file's "defaults", then the case's own entries, tensor by tensor.
  InputDists default_inputs;
  if (defaults.contains("inputs")) {
    auto d = parse_input_dists(defaults["inputs"], where + " defaults");
    if (!d) return d.status();
    default_inputs = std::move(*d);
  }
  auto read_inputs = [&](const Json* cj, Case& c, const std::string& at) -> Status {
    c.input_dists = default_inputs;
    if (cj && cj->contains("inputs")) {
      auto d = parse_input_dists((*cj)["inputs"], at);
      if (!d) return d.status();
      for (auto& [k, v] : *d) c.input_dists[k] = std::move(v);
    }
    return check_input_dists(c, at);
  };
  const ops::OpDef& conv2d = ops::find(Op::conv2d);
  std::set<std::string> names;
  // Geometry is checked before anything uses it: naming a sweep case computes K = C/groups*KH*KW,
  // which divided by zero for "groups": 0 (found by fuzz_case_file).
  auto add = [&](Case c, std::vector<DType> dts, const std::string& at) -> Status {
    if (!names.insert(c.name).second) return Error{at + ": duplicate case name '" + c.name + "'"};
    f.cases.push_back(std::move(c));
    f.case_dtypes.push_back(std::move(dts));
    return Status::ok();
  };
  // Counted before any case is built: every case (and its expansion) is held in memory, so a
  // sweep of 10^6 values otherwise ran until std::bad_alloc.
  const std::size_t listed = (j.contains("sweep") && j["sweep"].is_object() && j["sweep"].contains("in_channels") &&
                                      j["sweep"]["in_channels"].is_array()
                                  ? j["sweep"]["in_channels"].size()
                                  : 0) +
                             (j.contains("cases") && j["cases"].is_array() ? j["cases"].size() : 0);
  if (listed > kMaxCases)
    return Error{fmt::format("{}: {} cases (sweep values and 'cases' entries), more than the {} a case file may hold "
                             "(each case is some 30 files per dtype, and every case is held in memory while a set is "
                             "made, run and compared): split it into several case files and sets",
                             where, listed, kMaxCases)};
  if (j.contains("sweep")) {
    const Json& s = j["sweep"];
    if (!s.is_object() || !s.contains("in_channels") || !s["in_channels"].is_array())
      return Error{where + ": 'sweep' must be {\"in_channels\": [..]}"};
    for (auto& ic : s["in_channels"]) {
      if (!ic.is_number_integer()) return Error{where + ": sweep in_channels must be integers"};
      const std::string at = where + " sweep ic=" + std::to_string(ic.get<std::int64_t>());
      auto p = op_params(conv2d, nullptr, at);
      if (!p) return p.status();
      std::get<ConvParams>(*p).c = ic.get<std::int64_t>();
      VALIDATE_TRY(conv2d.check(*p, at));
      // The default sweep's case: a conv2d and its im2col matmul.
      Case c = Case::conv_with_im2col(conv2d.default_case_name(*p), std::get<ConvParams>(*p));
      VALIDATE_TRY(read_train(nullptr, c, at));
      VALIDATE_TRY(read_inputs(nullptr, c, at));
      VALIDATE_TRY(add(std::move(c), {}, at));
    }
  }
  if (j.contains("cases")) {
    if (!j["cases"].is_array()) return Error{where + ": 'cases' must be a list"};
    int i = 0;
    for (auto& cj : j["cases"]) {
      std::string at = where + " cases[" + std::to_string(i++) + "]";
      if (!cj.is_object()) return Error{at + ": expected an object"};
      // "op" picks the op (default conv2d, which brings its im2col matmul along).
      const ops::OpDef* def = &conv2d;
      if (cj.contains("op")) {
        def = cj["op"].is_string() ? ops::find(cj["op"].get<std::string>()) : nullptr;
        if (!def) {
          std::string names;
          for (const ops::OpDef* d : ops::registry()) names += (names.empty() ? "" : ", ") + std::string(d->name());
          return Error{at + ": 'op' must be one of " + names};
        }
      }
      auto p = op_params(*def, &cj, at);
      if (!p) return p.status();
      VALIDATE_TRY(def->check(*p, at));
      Case c;
      if (def == &conv2d) c = Case::conv_with_im2col("", std::get<ConvParams>(*p));
      else c.ops = {OpInstance{*p}};
      if (cj.contains("name")) {
        if (!cj["name"].is_string()) return Error{at + ": 'name' must be a string"};
        c.name = cj["name"].get<std::string>();
        VALIDATE_TRY(check_case_name(c.name, at));
      } else {
        c.name = def->default_case_name(*p);
      }
      VALIDATE_TRY(read_train(&cj, c, at));
      VALIDATE_TRY(read_inputs(&cj, c, at));
      std::vector<DType> dts;
      if (cj.contains("dtypes")) {
        auto d = read_dtypes(cj["dtypes"], at);
        if (!d) return d.status();
        dts = *d;
      }
      VALIDATE_TRY(add(std::move(c), std::move(dts), at));
    }
  }
  if (f.cases.empty()) return Error{where + ": no cases (give 'sweep' or 'cases')"};
  return f;
}

Status load_input_files(CaseFile& f, const std::string& path) {
  // One read per file, however many cases name it.
  std::map<std::string, std::pair<std::shared_ptr<const Tensor>, std::string>> read;
  const stdfs::path base = stdfs::path(path).parent_path();
  for (Case& c : f.cases)
    for (auto& [key, d] : c.input_dists) {
      if (d.dist != Dist::npy) continue;
      const std::string at = path + ": case '" + c.name + "' inputs." + key;
      const std::string file = stdfs::path(d.file).is_absolute() ? d.file : (base / d.file).string();
      if (!read.count(file)) {
        if (!stdfs::is_regular_file(file)) return Error{at + ": " + file + " is not a regular file"};
        auto t = npy::read(file);
        if (!t) return Error{at + ": " + t.message()};
        for (std::int64_t i = 0; i < t->numel(); ++i)
          if (!std::isfinite(static_cast<float>(t->get(i))))
            return Error{fmt::format("{}: {} holds {} at flat index {} (as float32): inputs must be finite", at, file,
                                     t->get(i), i)};
        auto h = sha256_file(file);
        if (!h) return Error{at + ": " + h.message()};
        read[file] = {std::make_shared<const Tensor>(std::move(*t)), *h};
      }
      const auto& [data, sha] = read[file];
      if (!d.sha256.empty() && d.sha256 != sha)
        return Error{at + ": " + file + " has sha256 " + sha + ", the case file asks for " + d.sha256};
      d.sha256 = sha;
      d.data = data;
      for (const OpInstance& inst : c.ops)
        for (const auto& t : c.inputs(inst.op()))
          if (c.input_dist(inst.op(), t.name) == &d && t.shape != data->shape())
            return Error{fmt::format("{}: {} has shape ({}), {} {} needs ({})", at, file, fmt::join(data->shape(), ", "),
                                     op_name(inst.op()), t.name, fmt::join(t.shape, ", "))};
    }
  return Status::ok();
}

Result<CaseFile> load_case_file(const std::string& path) {
  auto j = read_json(path, 16u << 20);
  if (!j) return j.status();
  auto f = parse_case_file(*j, path);
  if (!f) return f;
  VALIDATE_TRY(load_input_files(*f, path));
  return f;
}

Result<Shard> parse_shard(const std::string& text) {
  Shard s;
  char slash = 0;
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%d%c%d%n", &s.index, &slash, &s.count, &consumed) != 3 || slash != '/' ||
      consumed != static_cast<int>(text.size()) || s.count < 1 || s.index < 0 || s.index >= s.count)
    return Error{"--shard '" + text + "': expected i/n with 0 <= i < n (e.g. 0/4)"};
  return s;
}

Result<std::vector<Case>> expand(const CaseFile& file, const Selection& sel) {
  std::optional<Pattern> only;
  if (!sel.only.empty()) {
    auto p = Pattern::compile(sel.only, "--only");
    if (!p) return p.status();
    only = std::move(*p);
  }
  // Without --dtype: each case gets its own "dtypes" if it has one, else the file's. With --dtype:
  // the listed dtypes, less those a case explicitly excludes.
  std::vector<DType> dtypes = sel.dtypes;
  if (dtypes.empty()) {
    dtypes = file.dtypes;
    for (const auto& cd : file.case_dtypes)
      for (DType d : cd)
        if (std::find(dtypes.begin(), dtypes.end(), d) == dtypes.end()) dtypes.push_back(d);
  }
  std::vector<Case> all;
  for (DType d : dtypes) {
    for (std::size_t i = 0; i < file.cases.size(); ++i) {
      const auto& own = file.case_dtypes[i];
      const auto& allowed = own.empty() ? file.dtypes : own;
      bool listed = std::find(allowed.begin(), allowed.end(), d) != allowed.end();
      if (!listed && (!sel.dtypes.empty() ? !own.empty() : true)) continue;
      Case c = file.cases[i];
      c.dtype = d;
      if (only && !only->search(std::string(dtype_name(d)) + "/" + c.name)) continue;
      all.push_back(std::move(c));
    }
  }
  std::vector<Case> mine;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (static_cast<int>(i % static_cast<std::size_t>(sel.shard.count)) == sel.shard.index) mine.push_back(std::move(all[i]));
  return mine;
}

}  // namespace validate::cases
