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

std::string text_of(const Json* j) { return j ? json_text(*j) : "(none)"; }

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
  // The --dtype list each shard was made with (generate records it when sharding): shards of a
  // float32 sweep and of a bfloat16 sweep fit one cover by count and used to merge.
  if (reference) {
    const Json* sa = member(first.desc, "selection");
    const Json* sb = member(s.desc, "selection");
    const Json* da = sa ? member(*sa, "dtypes") : nullptr;
    const Json* db = sb ? member(*sb, "dtypes") : nullptr;
    if ((da == nullptr) != (db == nullptr) || (da && *da != *db))
      return Error{fmt::format("{} was generated with --dtype {} but {} (the first shard) with --dtype {}: "
                               "shards of different sweeps",
                               s.desc_path, text_of(db), first.desc_path, text_of(da))};
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

// Everything read from the shards before anything is written.
struct Inventory {
  std::string format;  // the shards' manifest format (reference set or run)
  bool reference = false;
  std::vector<ShardInfo> infos;
  std::map<std::string, std::string> owner;  // case key -> shard that has it
  std::map<std::string, std::pair<std::string, ManifestEntry>> files;  // rel -> (source, entry)
  Json sysinfo = Json::object();
  Json shard_list = Json::array();
  MergeSummary sum;
};

// The case keys of a shard, from its metadata (reference) or run (run dir) file names.
std::set<std::string> case_keys(const Json& manifest) {
  std::set<std::string> keys;
  for (auto& [rel, e] : manifest["files"].items()) {
    for (const char* suffix : {"_metadata.json", "_run.json"}) {
      std::string s(suffix);
      if (rel.size() > s.size() && rel.compare(rel.size() - s.size(), s.size(), s) == 0)
        keys.insert(rel.substr(0, rel.size() - s.size()));
    }
  }
  return keys;
}

// Reads one shard into `inv`: its manifest, config/run_info (same sweep as the first shard), its
// cases (none already owned by another shard) and files (none conflicting with another's).
Status read_shard(const std::string& dir, Inventory& inv) {
  auto m = read_manifest(dir);
  if (!m) return Error{"shard " + dir + ": " + m.message()};
  std::string f = m->value("format", "");
  if (inv.format.empty()) inv.format = f;
  if (f != inv.format)
    return Error{fmt::format("shard {} is a '{}' set, the first shard is '{}'", dir, f, inv.format)};
  if (m->contains("failed_cases")) return Error{"shard " + dir + " has failed cases; regenerate it first"};
  inv.reference = inv.format == kReferenceFormat;
  ShardInfo info;
  info.dir = dir;
  info.desc_path = (stdfs::path(dir) / (inv.reference ? "config.json" : "run_info.json")).string();
  auto desc = read_json(info.desc_path);
  if (!desc) return desc.status();
  info.desc = std::move(*desc);
  read_selection(info);
  if (!inv.infos.empty()) VALIDATE_TRY(check_same_sweep(inv.infos.front(), info, inv.reference));
  if (inv.sysinfo.empty() && fs::exists(dir + "/system_info.json"))
    if (auto s = read_json(dir + "/system_info.json")) inv.sysinfo = *s;
  inv.shard_list.push_back(stdfs::absolute(dir).lexically_normal().string());
  info.keys = case_keys(*m);
  for (const auto& k : info.keys) {
    auto [it, fresh] = inv.owner.emplace(k, dir);
    if (!fresh) return Error{fmt::format("case {} is in both {} and {}: shards overlap", k, it->second, dir)};
    ++inv.sum.cases;
  }
  for (auto& [rel, e] : (*m)["files"].items()) {
    if (is_set_file(rel)) continue;
    auto src = fs::join_inside(dir, rel);
    if (!src) return Error{"" + dir + "/manifest.json: " + src.message()};
    if (case_key_of(rel, info.keys).empty() && rel.rfind("variants/", 0) != 0)
      return Error{"" + *src + " belongs to no case of its shard"};
    ManifestEntry me{e.value("size", std::uint64_t{0}), e.value("sha256", std::string())};
    auto [it, fresh] = inv.files.emplace(rel, std::make_pair(*src, me));
    if (!fresh && it->second.second.sha256 != me.sha256)
      return Error{fmt::format("{} differs between {} and {}: conflicting shards", rel, it->second.first, *src)};
  }
  inv.infos.push_back(std::move(info));
  ++inv.sum.shards;
  return Status::ok();
}

// The set-level files of the merged set (relative path -> text), worked out before anything is
// written: config.json and README.md for a reference set, run_info.json for a run.
struct SetFiles {
  std::vector<std::pair<std::string, std::string>> texts;
};

// A reference set's config.json (the unsharded expanded list, dtypes in order of first
// appearance, as generate records them) and README.md (from every case's metadata).
Status reference_set_files(const Inventory& inv, const Json& selection, bool complete, SetFiles& out) {
  auto expanded = unsharded_cases(inv.infos, complete);
  if (!expanded) return expanded.status();
  Json config = inv.infos.front().desc;
  config["selection"] = selection;
  Json dtypes = Json::array();
  for (const auto& c : *expanded) {
    const Json d = c.value("dtype", std::string());
    if (std::find(dtypes.begin(), dtypes.end(), d) == dtypes.end()) dtypes.push_back(d);
  }
  config["dtypes"] = dtypes;
  config["expanded_cases"] = *expanded;
  std::vector<Case> list;
  for (const auto& c : *expanded) {
    const std::string key = c.value("dtype", std::string()) + "/" + c.value("name", std::string());
    const std::string meta_path = (stdfs::path(inv.owner.at(key)) / (key + "_metadata.json")).string();
    auto meta = read_json(meta_path);
    if (!meta) return meta.status();
    auto rc = case_from_metadata(*meta, meta_path);
    if (!rc) return rc.status();
    list.push_back(std::move(*rc));
  }
  const Json* seed = member(config, "seed");
  const Json* fill = member(config, "fill");
  std::string readme = set_readme(
      list, fmt::format("{} shard{} merged by `validate merge`", inv.sum.shards, inv.sum.shards == 1 ? "" : "s"),
      seed && seed->is_number_unsigned() ? seed->get<std::uint64_t>() : 0,
      fill && fill->is_string() ? fill->get<std::string>() : "random");
  out.texts.emplace_back("config.json", json_text(config, 2) + "\n");
  out.texts.emplace_back("README.md", readme);
  return Status::ok();
}

Result<SetFiles> set_files(const Inventory& inv, bool complete) {
  Json selection = {{"merged_from", inv.shard_list}};
  if (!complete) {
    selection["partial"] = true;
    selection["missing_shards"] = inv.sum.missing;
  }
  SetFiles files;
  if (inv.reference) {
    VALIDATE_TRY(reference_set_files(inv, selection, complete, files));
  } else {
    Json runinfo = inv.infos.front().desc;
    runinfo["selection"] = selection;
    runinfo["merged_from"] = inv.shard_list;
    files.texts.emplace_back("run_info.json", json_text(runinfo, 2) + "\n");
  }
  if (!inv.sysinfo.empty()) {
    Json sysinfo = inv.sysinfo;
    sysinfo["merged_from"] = inv.shard_list;
    files.texts.emplace_back("system_info.json", json_text(sysinfo, 2) + "\n");
  }
  return files;
}

// Copies every case file into `out`, each re-hashed against its shard's manifest on the way.
Status copy_case_files(const std::string& out, const Inventory& inv, FileMap& written, MergeSummary& sum) {
  for (const auto& [rel, src] : inv.files) {
    auto map = MappedFile::open(src.first);
    if (!map) return map.status();
    std::string h = sha256_hex(map->data(), map->size());
    if (h != src.second.sha256)
      return Error{fmt::format("{} hashes to {} but its shard's manifest says {}", src.first, h, src.second.sha256)};
    std::string dst = (stdfs::path(out) / rel).string();
    VALIDATE_TRY(fs::make_dirs(stdfs::path(dst).parent_path().string()));
    VALIDATE_TRY(fs::write_atomic(dst, map->data(), map->size()));
    written[rel] = {map->size(), h};
    sum.bytes += map->size();
    ++sum.files;
  }
  return Status::ok();
}

}  // namespace

Result<MergeSummary> merge_sets(const std::string& out, const std::vector<std::string>& shards,
                                const MergeOptions& opt) {
  if (shards.empty()) return Error{"no shard directories given"};
  Inventory inv;
  for (const auto& dir : shards) VALIDATE_TRY(read_shard(dir, inv));
  auto missing = check_cover(inv.infos, opt.allow_partial);
  if (!missing) return missing.status();
  inv.sum.missing = *missing;
  const bool complete = inv.sum.missing.empty() &&
                        std::all_of(inv.infos.begin(), inv.infos.end(),
                                    [](const ShardInfo& s) { return s.shard.has_value(); });
  auto texts = set_files(inv, complete);
  if (!texts) return texts.status();

  // A new or empty OUT (or --overwrite), never one of the shards or inside one, one writer: no
  // file of an earlier set is mistaken for part of the merged one. Claimed only now, after every
  // check, so a refused merge leaves nothing behind.
  auto out_dir = fs::claim_output_dir(out, {"OUT", shards, opt.overwrite, false});
  if (!out_dir) return out_dir.status();
  MergeSummary sum = inv.sum;
  FileMap written;
  VALIDATE_TRY(copy_case_files(out, inv, written, sum));
  for (const auto& [rel, text] : texts->texts) {
    VALIDATE_TRY(fs::write_atomic((stdfs::path(out) / rel).string(), text));
    written[rel] = {text.size(), sha256_hex(text.data(), text.size())};
  }
  Json extra = {{"merged_from", inv.shard_list}, {"cases", sum.cases}};
  if (!complete) extra["partial"] = true;
  VALIDATE_TRY(write_manifest(out, inv.format, written, extra));
  return sum;
}

}  // namespace validate::cases
