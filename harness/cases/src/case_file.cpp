#include "validate/cases/case_file.hpp"

#include <algorithm>
#include <regex>
#include <set>

#include <fmt/format.h>

namespace validate::cases {

namespace {

Status read_pair(const Json& j, const char* key, std::array<std::int64_t, 2>& out, const std::string& where) {
  if (!j.contains(key)) return Status::ok();
  const Json& v = j.at(key);
  if (v.is_number_integer()) {
    out = {v.get<std::int64_t>(), v.get<std::int64_t>()};
    return Status::ok();
  }
  if (v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[1].is_number_integer()) {
    out = {v[0].get<std::int64_t>(), v[1].get<std::int64_t>()};
    return Status::ok();
  }
  return Error{where + ": '" + key + "' must be an integer or a pair of integers"};
}

Status read_int(const Json& j, const char* key, std::int64_t& out, const std::string& where) {
  if (!j.contains(key)) return Status::ok();
  if (!j.at(key).is_number_integer()) return Error{where + ": '" + key + "' must be an integer"};
  out = j.at(key).get<std::int64_t>();
  return Status::ok();
}

const std::set<std::string> kGeometryKeys = {"name", "batch", "in_channels", "height", "width", "out_channels",
                                             "kernel", "padding", "stride", "dilation", "groups", "bias", "dtypes"};

// Applies the geometry keys of `j` over `c`.
Status apply_geometry(const Json& j, ConvParams& c, const std::string& where) {
  if (!j.is_object()) return Error{where + ": expected an object"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!kGeometryKeys.count(it.key())) return Error{where + ": unknown key '" + it.key() + "'"};
  VALIDATE_TRY(read_int(j, "batch", c.n, where));
  VALIDATE_TRY(read_int(j, "in_channels", c.c, where));
  VALIDATE_TRY(read_int(j, "height", c.h, where));
  VALIDATE_TRY(read_int(j, "width", c.w, where));
  VALIDATE_TRY(read_int(j, "out_channels", c.o, where));
  VALIDATE_TRY(read_int(j, "groups", c.groups, where));
  std::array<std::int64_t, 2> k{c.kh, c.kw};
  VALIDATE_TRY(read_pair(j, "kernel", k, where));
  c.kh = k[0];
  c.kw = k[1];
  VALIDATE_TRY(read_pair(j, "padding", c.padding, where));
  VALIDATE_TRY(read_pair(j, "stride", c.stride, where));
  VALIDATE_TRY(read_pair(j, "dilation", c.dilation, where));
  if (j.contains("bias")) {
    if (!j.at("bias").is_boolean()) return Error{where + ": 'bias' must be true or false"};
    c.bias = j.at("bias").get<bool>();
  }
  return Status::ok();
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
  ConvParams defaults;
  if (j.contains("defaults")) VALIDATE_TRY(apply_geometry(j["defaults"], defaults, where + " defaults"));
  std::set<std::string> names;
  // Geometry is checked before anything uses it: naming a sweep case computes K = C/groups*KH*KW,
  // which divided by zero for "groups": 0 (found by fuzz_case_file).
  auto add = [&](Case c, std::vector<DType> dts, const std::string& at) -> Status {
    c.matmul = im2col_gemm(c.conv);
    if (!names.insert(c.name).second) return Error{at + ": duplicate case name '" + c.name + "'"};
    f.cases.push_back(std::move(c));
    f.case_dtypes.push_back(std::move(dts));
    return Status::ok();
  };
  if (j.contains("sweep")) {
    const Json& s = j["sweep"];
    if (!s.is_object() || !s.contains("in_channels") || !s["in_channels"].is_array())
      return Error{where + ": 'sweep' must be {\"in_channels\": [..]}"};
    for (auto& ic : s["in_channels"]) {
      if (!ic.is_number_integer()) return Error{where + ": sweep in_channels must be integers"};
      Case c;
      c.conv = defaults;
      c.conv.c = ic.get<std::int64_t>();
      const std::string at = where + " sweep ic=" + std::to_string(ic.get<std::int64_t>());
      VALIDATE_TRY(check_conv(c.conv, at));
      c.name = default_case_name(c.conv);
      VALIDATE_TRY(add(std::move(c), {}, at));
    }
  }
  if (j.contains("cases")) {
    if (!j["cases"].is_array()) return Error{where + ": 'cases' must be a list"};
    int i = 0;
    for (auto& cj : j["cases"]) {
      std::string at = where + " cases[" + std::to_string(i++) + "]";
      Case c;
      c.conv = defaults;
      VALIDATE_TRY(apply_geometry(cj, c.conv, at));
      VALIDATE_TRY(check_conv(c.conv, at));
      if (cj.contains("name")) {
        if (!cj["name"].is_string()) return Error{at + ": 'name' must be a string"};
        c.name = cj["name"].get<std::string>();
        VALIDATE_TRY(check_case_name(c.name, at));
      } else {
        c.name = default_case_name(c.conv);
      }
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

Result<CaseFile> load_case_file(const std::string& path) {
  auto j = read_json(path, 16u << 20);
  if (!j) return j.status();
  return parse_case_file(*j, path);
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
  std::optional<std::regex> only;
  if (!sel.only.empty()) {
    try {
      only.emplace(sel.only);
    } catch (const std::regex_error& e) {
      return Error{"--only '" + sel.only + "' is not a valid regular expression: " + e.what()};
    }
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
      if (only && !std::regex_search(std::string(dtype_name(d)) + "/" + c.name, *only)) continue;
      all.push_back(std::move(c));
    }
  }
  std::vector<Case> mine;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (static_cast<int>(i % static_cast<std::size_t>(sel.shard.count)) == sel.shard.index) mine.push_back(std::move(all[i]));
  return mine;
}

}  // namespace validate::cases
