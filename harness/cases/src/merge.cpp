#include "validate/cases/merge.hpp"

#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "validate/cases/refset.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/mapped_file.hpp"
#include "validate/core/sha256.hpp"

namespace validate::cases {

namespace stdfs = std::filesystem;

namespace {

// Files that describe the whole set rather than one case; merged, not copied.
bool is_set_file(const std::string& rel) {
  return rel == "manifest.json" || rel == "config.json" || rel == "system_info.json" || rel == "README.md" ||
         rel == "run_info.json";
}

// "float32/k0072_ic008_conv2d_input.npy" -> "float32/k0072_ic008" using the shard's metadata/run
// file names, which are the only reliable way to split "<case>_<op>_<tensor>".
std::string case_key_of(const std::string& rel, const std::set<std::string>& case_keys) {
  std::string best;
  for (const auto& k : case_keys)
    if (rel.rfind(k + "_", 0) == 0 && k.size() > best.size()) best = k;
  return best;
}

Json config_identity(const Json& config) {
  Json j = config;
  j.erase("selection");
  j.erase("dtypes");
  j.erase("expanded_cases");
  return j;
}

}  // namespace

Result<MergeSummary> merge_sets(const std::string& out, const std::vector<std::string>& shards) {
  if (shards.empty()) return Error{"no shard directories given"};
  MergeSummary sum;
  std::map<std::string, std::string> owner;  // case key -> shard that has it
  std::map<std::string, std::pair<std::string, ManifestEntry>> files;  // rel -> (source path, entry)
  Json config, sysinfo = Json::object(), expanded = Json::array(), runinfo;
  std::string format;
  Json shard_list = Json::array();
  for (const auto& dir : shards) {
    auto m = read_manifest(dir);
    if (!m) return Error{"shard " + dir + ": " + m.message()};
    std::string f = m->value("format", "");
    if (format.empty()) format = f;
    if (f != format) return Error{fmt::format("shard {} is a '{}' set, the first shard is '{}'", dir, f, format)};
    if (m->contains("failed_cases")) return Error{"shard " + dir + " has failed cases; regenerate it first"};
    // Identity of the sweep: every shard must come from the same case file, seed and fill.
    std::string cfg_path = dir + "/config.json";
    if (fs::exists(cfg_path)) {
      auto c = read_json(cfg_path);
      if (!c) return c.status();
      if (config.is_null()) config = *c;
      else if (config_identity(*c) != config_identity(config))
        return Error{"" + cfg_path + " describes a different sweep (case file, seed or fill) than the first shard"};
      if (c->contains("expanded_cases"))
        for (auto& e : (*c)["expanded_cases"]) expanded.push_back(e);
    }
    if (fs::exists(dir + "/system_info.json")) {
      auto s = read_json(dir + "/system_info.json");
      if (s && sysinfo.empty()) sysinfo = *s;
    }
    if (fs::exists(dir + "/run_info.json") && runinfo.is_null()) {
      auto r = read_json(dir + "/run_info.json");
      if (r) runinfo = *r;
    }
    shard_list.push_back(stdfs::absolute(dir).lexically_normal().string());
    // Case keys of this shard, from its metadata (reference) or run (run dir) files.
    std::set<std::string> keys;
    for (auto& [rel, e] : (*m)["files"].items()) {
      for (const char* suffix : {"_metadata.json", "_run.json"}) {
        std::string s(suffix);
        if (rel.size() > s.size() && rel.compare(rel.size() - s.size(), s.size(), s) == 0) keys.insert(rel.substr(0, rel.size() - s.size()));
      }
    }
    for (const auto& k : keys) {
      auto [it, fresh] = owner.emplace(k, dir);
      if (!fresh) return Error{fmt::format("case {} is in both {} and {}: shards overlap", k, it->second, dir)};
      ++sum.cases;
    }
    for (auto& [rel, e] : (*m)["files"].items()) {
      if (is_set_file(rel)) continue;
      auto src = fs::join_inside(dir, rel);
      if (!src) return Error{"" + dir + "/manifest.json: " + src.message()};
      if (case_key_of(rel, keys).empty() && rel.rfind("variants/", 0) != 0)
        return Error{"" + *src + " belongs to no case of its shard"};
      ManifestEntry me{e.value("size", std::uint64_t{0}), e.value("sha256", std::string())};
      auto [it, fresh] = files.emplace(rel, std::make_pair(*src, me));
      if (!fresh && it->second.second.sha256 != me.sha256)
        return Error{fmt::format("{} differs between {} and {}: conflicting shards", rel, it->second.first, *src)};
    }
    ++sum.shards;
  }
  VALIDATE_TRY(fs::make_dirs(out));
  stdfs::remove(stdfs::path(out) / "manifest.json");
  FileMap written;
  for (const auto& [rel, src] : files) {
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
  auto add_json = [&](const std::string& rel, const Json& j) -> Status {
    std::string text = j.dump(2) + "\n";
    VALIDATE_TRY(fs::write_atomic((stdfs::path(out) / rel).string(), text));
    written[rel] = {text.size(), sha256_hex(text.data(), text.size())};
    return Status::ok();
  };
  if (!config.is_null()) {
    config["selection"] = {{"merged_from", shard_list}};
    config["expanded_cases"] = expanded;
    VALIDATE_TRY(add_json("config.json", config));
  }
  if (!sysinfo.empty()) {
    sysinfo["merged_from"] = shard_list;
    VALIDATE_TRY(add_json("system_info.json", sysinfo));
  }
  if (!runinfo.is_null()) {
    runinfo["merged_from"] = shard_list;
    VALIDATE_TRY(add_json("run_info.json", runinfo));
  }
  Json extra = {{"merged_from", shard_list}, {"cases", sum.cases}};
  VALIDATE_TRY(write_manifest(out, format, written, extra));
  return sum;
}

}  // namespace validate::cases
