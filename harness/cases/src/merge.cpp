#include "validate/cases/merge.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "validate/cases/case_file.hpp"
#include "validate/cases/readme.hpp"
#include "validate/cases/refset.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/mapped_file.hpp"
#include "validate/core/output_dir.hpp"
#include "validate/core/sha256.hpp"

namespace validate::cases {

namespace stdfs = std::filesystem;

namespace {

// Files that describe the whole set rather than one case; merged, not copied.
bool is_set_file(const std::string& rel) {
  return rel == "manifest.json" || rel == "config.json" || rel == "system_info.json" ||
         rel == "README.md" || rel == "run_info.json";
}

// "float32/k0072_ic008_conv2d_input.npy" -> "float32/k0072_ic008" using the shard's metadata/run
// file names, which are the only reliable way to split "<case>_<op>_<tensor>".
std::string case_key_of(const std::string& rel, const std::set<std::string>& case_keys) {
  std::string best;
  for (const auto& k : case_keys)
    if (rel.rfind(k + "_", 0) == 0 && k.size() > best.size()) best = k;
  return best;
}

// What must be equal in every shard of one sweep: the config less what the shard selected.
Json config_identity(const Json& config) {
  Json j = config;
  j.erase("selection");
  j.erase("dtypes");
  j.erase("expanded_cases");
  return j;
}

std::string text_of(const Json* j) { return j ? j->dump() : "(none)"; }

const Json* member(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

struct ShardInfo {
  std::string dir;
  Json desc;  // config.json (reference set) or run_info.json (run)
  std::string desc_path;
  std::optional<Shard> shard;  // from desc["selection"]["shard"]; none: not recorded
  std::string only;
  std::set<std::string> keys;  // "dtype/case" of this shard's cases
};

// The shard's `--shard i/n` and `--only`, as generate and run record them.
void read_selection(ShardInfo& s) {
  const Json* sel = member(s.desc, "selection");
  const Json* sh = sel ? member(*sel, "shard") : nullptr;
  const Json* only = sel ? member(*sel, "only") : nullptr;
  if (only && only->is_string()) s.only = only->get<std::string>();
  if (sh && sh->is_string())
    if (auto p = parse_shard(sh->get<std::string>())) s.shard = *p;
}

std::string shard_text(const Shard& s) { return fmt::format("{}/{}", s.index, s.count); }

// Refuses shards that are not one sweep, naming the first key that differs.
Status check_same_sweep(const ShardInfo& first, const ShardInfo& s, bool reference) {
  const std::vector<const char*> keys = reference ? std::vector<const char*>{"seed", "fill"}
                                                  : std::vector<const char*>{"backend", "layout"};
  for (const char* k : keys) {
    const Json *a = member(first.desc, k), *b = member(s.desc, k);
    if ((a == nullptr) != (b == nullptr) || (a && *a != *b))
      return Error{
          fmt::format("{} has {} {} but {} (the first shard) has {}: shards of different sweeps",
                      s.desc_path, k, text_of(b), first.desc_path, text_of(a))};
  }
  if (reference && config_identity(first.desc) != config_identity(s.desc))
    return Error{
        fmt::format("{} describes a different case file than {}: shards of different sweeps",
                    s.desc_path, first.desc_path)};
  if (!reference) {
    const Json* ra = member(first.desc, "reference");
    const Json* rb = member(s.desc, "reference");
    const Json* ha = ra ? member(*ra, "manifest_sha256") : nullptr;
    const Json* hb = rb ? member(*rb, "manifest_sha256") : nullptr;
    if ((ha == nullptr) != (hb == nullptr) || (ha && *ha != *hb))
      return Error{fmt::format("{} ran on a reference set (manifest {}) other than {}'s ({})",
                               s.desc_path, text_of(hb), first.desc_path, text_of(ha))};
  }
  if (s.only != first.only)
    return Error{
        fmt::format("{} selected --only '{}' but {} selected '{}': shards of different sweeps",
                    s.desc_path, s.only, first.desc_path, first.only)};
  return Status::ok();
}

// Every shard of one split 0/n .. n-1/n, each once. Returns the missing ones ("i/n").
Result<std::vector<std::string>> check_cover(const std::vector<ShardInfo>& infos,
                                             bool allow_partial) {
  std::vector<std::string> missing;
  const ShardInfo* unknown = nullptr;
  std::map<int, const ShardInfo*> have;
  const ShardInfo* first = nullptr;  // the first shard with a recorded selection
  for (const auto& s : infos) {
    if (!s.shard) {
      unknown = &s;
      continue;
    }
    if (!first) first = &s;
    if (s.shard->count != first->shard->count)
      return Error{fmt::format("{} is shard {} but {} is shard {}: shards of different splits",
                               s.dir, shard_text(*s.shard), first->dir, shard_text(*first->shard))};
    auto [it, fresh] = have.emplace(s.shard->index, &s);
    if (!fresh)
      return Error{fmt::format("{} and {} are both shard {}: shards overlap", it->second->dir,
                               s.dir, shard_text(*s.shard))};
  }
  if (unknown && !allow_partial)
    return Error{
        fmt::format("{} records no --shard i/n selection, so the merge cannot tell whether every "
                    "shard is there; "
                    "pass --allow-partial to merge anyway",
                    unknown->desc_path)};
  if (first) {
    const int n = first->shard->count;
    for (int i = 0; i < n; ++i)
      if (!have.count(i)) missing.push_back(fmt::format("{}/{}", i, n));
  }
  if (!missing.empty() && !allow_partial) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    return Error{fmt::format(
        "incomplete: shard{} {} missing ({} of {} given); merge every shard, or pass "
        "--allow-partial "
        "to merge a subset",
        missing.size() == 1 ? "" : "s", list, have.size(), have.size() + missing.size())};
  }
  return missing;
}

// expanded_cases of all shards in the unsharded order: shard i of n holds items i, i+n, i+2n, ...
// of the sweep. A full cover must account for every position, or a shard is not what it says.
Result<Json> unsharded_cases(const std::vector<ShardInfo>& infos, bool complete) {
  std::vector<std::pair<std::int64_t, Json>> items;
  std::int64_t total = 0, next_unknown = 0;
  for (const auto& s : infos) {
    const Json* e = member(s.desc, "expanded_cases");
    if (e && e->is_array()) total += static_cast<std::int64_t>(e->size());
  }
  for (const auto& s : infos) {
    const Json* e = member(s.desc, "expanded_cases");
    if (!e || !e->is_array()) return Error{s.desc_path + ": no \"expanded_cases\" list"};
    if (complete) {
      const std::int64_t i = s.shard->index, n = s.shard->count;
      const std::int64_t want = total > i ? (total - i + n - 1) / n : 0;
      if (static_cast<std::int64_t>(e->size()) != want)
        return Error{
            fmt::format("{} lists {} cases, but shard {} of a {}-case sweep split {} ways holds "
                        "{}: not a shard "
                        "of this sweep",
                        s.desc_path, e->size(), shard_text(*s.shard), total, n, want)};
    }
    std::int64_t k = 0;
    for (const auto& c : *e) {
      const std::string key =
          c.value("dtype", std::string()) + "/" + c.value("name", std::string());
      if (!s.keys.count(key))
        return Error{
            fmt::format("{} lists case {}, which its manifest does not have", s.desc_path, key)};
      // Shards without a recorded selection (--allow-partial) go after the others, in given order.
      const std::int64_t at =
          s.shard ? s.shard->index + k * s.shard->count : total + next_unknown++;
      items.emplace_back(at, c);
      ++k;
    }
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  Json out = Json::array();
  for (auto& it : items) out.push_back(std::move(it.second));
  return out;
}

}  // namespace

Result<MergeSummary> merge_sets(const std::string& out, const std::vector<std::string>& shards,
                                const MergeOptions& opt) {
  if (shards.empty()) return Error{"no shard directories given"};

  MergeSummary sum;
  std::map<std::string, std::string> owner;  // case key -> shard that has it
  std::map<std::string, std::pair<std::string, ManifestEntry>> files;  // rel -> (source, entry)
  Json sysinfo = Json::object();
  std::string format;
  Json shard_list = Json::array();
  std::vector<ShardInfo> infos;
  for (const auto& dir : shards) {
    auto m = read_manifest(dir);
    if (!m) return Error{"shard " + dir + ": " + m.message()};
    std::string f = m->value("format", "");
    if (format.empty()) format = f;
    if (f != format)
      return Error{fmt::format("shard {} is a '{}' set, the first shard is '{}'", dir, f, format)};
    if (m->contains("failed_cases"))
      return Error{"shard " + dir + " has failed cases; regenerate it first"};
    const bool reference = format == kReferenceFormat;
    ShardInfo info;
    info.dir = dir;
    info.desc_path = (stdfs::path(dir) / (reference ? "config.json" : "run_info.json")).string();
    auto desc = read_json(info.desc_path);
    if (!desc) return desc.status();
    info.desc = std::move(*desc);
    read_selection(info);
    if (!infos.empty()) VALIDATE_TRY(check_same_sweep(infos.front(), info, reference));
    if (sysinfo.empty() && fs::exists(dir + "/system_info.json"))
      if (auto s = read_json(dir + "/system_info.json")) sysinfo = *s;
    shard_list.push_back(stdfs::absolute(dir).lexically_normal().string());
    // Case keys of this shard, from its metadata (reference) or run (run dir) files.
    for (auto& [rel, e] : (*m)["files"].items()) {
      for (const char* suffix : {"_metadata.json", "_run.json"}) {
        std::string s(suffix);
        if (rel.size() > s.size() && rel.compare(rel.size() - s.size(), s.size(), s) == 0)
          info.keys.insert(rel.substr(0, rel.size() - s.size()));
      }
    }
    for (const auto& k : info.keys) {
      auto [it, fresh] = owner.emplace(k, dir);
      if (!fresh)
        return Error{
            fmt::format("case {} is in both {} and {}: shards overlap", k, it->second, dir)};
      ++sum.cases;
    }
    for (auto& [rel, e] : (*m)["files"].items()) {
      if (is_set_file(rel)) continue;
      auto src = fs::join_inside(dir, rel);
      if (!src) return Error{"" + dir + "/manifest.json: " + src.message()};
      if (case_key_of(rel, info.keys).empty() && rel.rfind("variants/", 0) != 0)
        return Error{"" + *src + " belongs to no case of its shard"};
      ManifestEntry me{e.value("size", std::uint64_t{0}), e.value("sha256", std::string())};
      auto [it, fresh] = files.emplace(rel, std::make_pair(*src, me));
      if (!fresh && it->second.second.sha256 != me.sha256)
        return Error{fmt::format("{} differs between {} and {}: conflicting shards", rel,
                                 it->second.first, *src)};
    }
    infos.push_back(std::move(info));
    ++sum.shards;
  }
  auto missing = check_cover(infos, opt.allow_partial);
  if (!missing) return missing.status();
  sum.missing = *missing;
  const bool complete =
      sum.missing.empty() && std::all_of(infos.begin(), infos.end(),
                                         [](const ShardInfo& s) { return s.shard.has_value(); });
  const bool reference = format == kReferenceFormat;

  // The set-level files, worked out before anything is written.
  Json selection = {{"merged_from", shard_list}};
  if (!complete) {
    selection["partial"] = true;
    selection["missing_shards"] = sum.missing;
  }
  Json config, runinfo;
  std::string readme;
  if (reference) {
    auto expanded = unsharded_cases(infos, complete);
    if (!expanded) return expanded.status();
    config = infos.front().desc;
    config["selection"] = selection;
    // dtypes as generate records them: in order of first appearance in the expanded list.
    Json dtypes = Json::array();
    for (const auto& c : *expanded) {
      const Json d = c.value("dtype", std::string());
      if (std::find(dtypes.begin(), dtypes.end(), d) == dtypes.end()) dtypes.push_back(d);
    }
    config["dtypes"] = dtypes;
    config["expanded_cases"] = *expanded;
    std::vector<Case> list;
    for (const auto& c : *expanded) {
      const std::string key =
          c.value("dtype", std::string()) + "/" + c.value("name", std::string());
      const std::string meta_path =
          (stdfs::path(owner.at(key)) / (key + "_metadata.json")).string();
      auto meta = read_json(meta_path);
      if (!meta) return meta.status();
      auto rc = case_from_metadata(*meta, meta_path);
      if (!rc) return rc.status();
      list.push_back(std::move(*rc));
    }
    const Json* seed = member(config, "seed");
    const Json* fill = member(config, "fill");
    readme = set_readme(list,
                        fmt::format("{} shard{} merged by `validate merge`", sum.shards,
                                    sum.shards == 1 ? "" : "s"),
                        seed && seed->is_number_unsigned() ? seed->get<std::uint64_t>() : 0,
                        fill && fill->is_string() ? fill->get<std::string>() : "random");
  } else {
    runinfo = infos.front().desc;
    runinfo["selection"] = selection;
    runinfo["merged_from"] = shard_list;
  }

  // A new or empty OUT (or --overwrite), never one of the shards or inside one, one writer: no
  // file of an earlier set is mistaken for part of the merged one. Claimed only now, after every
  // check, so a refused merge leaves nothing behind.
  auto out_dir = fs::claim_output_dir(out, {"OUT", shards, opt.overwrite, false});
  if (!out_dir) return out_dir.status();
  FileMap written;
  for (const auto& [rel, src] : files) {
    auto map = MappedFile::open(src.first);
    if (!map) return map.status();
    std::string h = sha256_hex(map->data(), map->size());
    if (h != src.second.sha256)
      return Error{fmt::format("{} hashes to {} but its shard's manifest says {}", src.first, h,
                               src.second.sha256)};
    std::string dst = (stdfs::path(out) / rel).string();
    VALIDATE_TRY(fs::make_dirs(stdfs::path(dst).parent_path().string()));
    VALIDATE_TRY(fs::write_atomic(dst, map->data(), map->size()));
    written[rel] = {map->size(), h};
    sum.bytes += map->size();
    ++sum.files;
  }
  auto add_text = [&](const std::string& rel, const std::string& text) -> Status {
    VALIDATE_TRY(fs::write_atomic((stdfs::path(out) / rel).string(), text));
    written[rel] = {text.size(), sha256_hex(text.data(), text.size())};
    return Status::ok();
  };
  if (reference) {
    VALIDATE_TRY(add_text("config.json", config.dump(2) + "\n"));
    VALIDATE_TRY(add_text("README.md", readme));
  } else {
    VALIDATE_TRY(add_text("run_info.json", runinfo.dump(2) + "\n"));
  }
  if (!sysinfo.empty()) {
    sysinfo["merged_from"] = shard_list;
    VALIDATE_TRY(add_text("system_info.json", sysinfo.dump(2) + "\n"));
  }
  Json extra = {{"merged_from", shard_list}, {"cases", sum.cases}};
  if (!complete) extra["partial"] = true;
  VALIDATE_TRY(write_manifest(out, format, written, extra));
  return sum;
}

}  // namespace validate::cases
