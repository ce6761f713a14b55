#include "validate/cases/verify.hpp"

#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "validate/cases/refset.hpp"
#include "validate/cases/scale_check.hpp"
#include "validate/cases/verify_hashes.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/sha256.hpp"
#include "validate/core/tensor_hash.hpp"
#include "validate/core/tree.hpp"

namespace validate::cases {

namespace {

// Every listed file: present as a regular file (never through a symlink), of the listed size, with
// the listed sha256.
void check_listed(const std::string& set_dir, const Json& files, const std::map<std::string, fs::TreeEntry>& on_disk,
                  const VerifyHashes& hashes, VerifyReport& rep) {
  for (auto& [rel, entry] : files.items()) {
    const std::string path = set_dir + "/" + rel;
    ++rep.files_checked;
    auto it = on_disk.find(rel);
    if (it == on_disk.end()) {
      rep.mismatches.push_back(fmt::format("{}: missing (listed in the manifest)", path));
      continue;
    }
    if (it->second.type != fs::EntryType::regular) {
      rep.mismatches.push_back(
          fmt::format("{}: is a {}, not a regular file (listed in the manifest)", path, fs::entry_type_name(it->second.type)));
      continue;
    }
    auto pre = hashes.file_sha256(path);  // taken on all cores up front (verify_hashes.hpp)
    auto h = pre ? Result<std::string>(*pre) : sha256_file(path);
    if (!h) {
      rep.mismatches.push_back(fmt::format("{}: unreadable: {}", path, h.message()));
      continue;
    }
    const std::string want = entry["sha256"].get<std::string>();
    if (*h != want) rep.mismatches.push_back(fmt::format("{}: sha256 {} but the manifest says {}", path, *h, want));
    if (entry.contains("size") && entry["size"].get<std::uint64_t>() != it->second.size)
      rep.mismatches.push_back(
          fmt::format("{}: {} bytes but the manifest says {}", path, it->second.size, entry["size"].get<std::uint64_t>()));
  }
}

// Anything in the directory the manifest does not list is an error: `list`, `run` and `compare`
// never read it, so a set that holds it is not the set its manifest describes (a stale case of an
// earlier generate used to pass verify with a warning and then be run and compared).
void check_unlisted(const std::string& set_dir, const Json& files, bool run_dir, const fs::TreeWalk& walk,
                    VerifyReport& rep) {
  for (const auto& e : walk.entries) {
    if (e.rel == "manifest.json" && e.type == fs::EntryType::regular) continue;
    // A run's work/ is the exec runner's scratch (case.json, logs, --keep-work inputs): never part
    // of the result, never read by compare (docs/formats.md).
    if (run_dir && (e.rel == "work" || e.rel.rfind("work/", 0) == 0)) continue;
    if (e.type == fs::EntryType::directory) continue;
    if (files.contains(e.rel)) continue;
    rep.mismatches.push_back(fmt::format("{}/{}: {} not listed in the manifest (a set is exactly what its manifest lists)",
                                         set_dir, e.rel, fs::entry_type_name(e.type)));
  }
  for (const auto& err : walk.errors) rep.mismatches.push_back(err);
}

// A result's NaN count and finite max|x| (however they were taken) against its metadata.
void check_result_values(const std::string& path, const std::string& name, std::int64_t nans,
                         const std::optional<double>& actual, const Json* tj, bool has_max, VerifyReport& rep) {
  if (nans)
    rep.mismatches.push_back(
        fmt::format("{}: the reference '{}' holds {} NaN value(s): a broken reference", path, name, nans));
  if (has_max) {
    const Json& m = (*tj)["max_abs"];
    if (!m.is_number() || !actual || m.get<double>() != *actual)
      rep.mismatches.push_back(fmt::format("{}: metadata max_abs {} but the data's is {} (compare takes its near-zero "
                                           "floor from it)",
                                           path, json_text(m), actual ? fmt::format("{}", *actual) : "not finite"));
  }
}

// Inputs against their metadata hashes; results against the max_abs the metadata records (compare
// takes its near-zero floor from it) and for NaN (a NaN reference is a broken reference).
void check_case_tensors(const RefCase& rc, const VerifyHashes& hashes, VerifyReport& rep) {
  for (const OpInstance& inst : rc.c.ops) {
    const Op op = inst.op();
    for (const auto& t : rc.c.tensors(op)) {
      const std::string path = rc.dtype_dir + "/" + rc.c.file_name(op, t.name);
      const Json* tj = metadata_tensor(rc.metadata, op, t.name);
      const bool input = t.role == Role::input;
      const bool has_max = tj && tj->contains("max_abs");
      std::string want;
      if (input) {
        want = metadata_hash(rc.metadata, op, t.name);
        if (want.empty()) {
          rep.mismatches.push_back(fmt::format("{}: metadata has no sha256 for input '{}'", path, t.name));
          continue;
        }
        ++rep.inputs_checked;
        if (const FileHashResult* pre = hashes.value(path)) {  // shape and value hash from the parallel pass
          if (pre->shape != t.shape)
            rep.mismatches.push_back(fmt::format("{}: shape {} but metadata says {}", path, shape_to_string(pre->shape),
                                                 shape_to_string(t.shape)));
          else if (pre->value_sha256 != want)
            rep.mismatches.push_back(
                fmt::format("{}: input '{}' values hash to {} but metadata says {}", path, t.name, pre->value_sha256, want));
          continue;
        }
      }
      if (const FileHashResult* pre = input ? nullptr : hashes.scan(path)) {  // scanned in the parallel pass
        if (pre->shape != t.shape) {
          rep.mismatches.push_back(fmt::format("{}: shape {} but metadata says {}", path, shape_to_string(pre->shape),
                                               shape_to_string(t.shape)));
          continue;
        }
        check_result_values(path, t.name, pre->nans, pre->max_abs, tj, has_max, rep);
        continue;
      }
      auto tensor = npy::read(path);
      if (!tensor) {
        rep.mismatches.push_back(fmt::format("{}: {}", path, tensor.message()));
        continue;
      }
      if (tensor->shape() != t.shape) {
        rep.mismatches.push_back(fmt::format("{}: shape {} but metadata says {}", path, shape_to_string(tensor->shape()),
                                             shape_to_string(t.shape)));
        continue;
      }
      if (input) {
        std::string got = tensor_sha256(*tensor);
        if (got != want)
          rep.mismatches.push_back(fmt::format("{}: input '{}' values hash to {} but metadata says {}", path, t.name, got, want));
        continue;
      }
      std::int64_t nans = 0;
      if (tensor->dtype() == DType::float32) {
        const float* p = tensor->data<float>();
        for (std::int64_t i = 0; i < tensor->numel(); ++i) nans += p[i] != p[i];  // vectorizes; isnan does not
      } else {
        for (std::int64_t i = 0; i < tensor->numel(); ++i) nans += std::isnan(tensor->get(i));
      }
      check_result_values(path, t.name, nans, finite_max_abs(*tensor), tj, has_max, rep);
    }
  }
}

}  // namespace

Result<VerifyReport> verify_set(const std::string& set_dir) {
  auto manifest = read_manifest(set_dir);
  if (!manifest) return manifest.status();
  auto walk = fs::walk_tree(set_dir);
  if (!walk) return walk.status();
  std::map<std::string, fs::TreeEntry> on_disk;
  for (const auto& e : walk->entries) on_disk.emplace(e.rel, e);

  // The cases once, first: malformed metadata cannot be checked at all (exit 2), and the parallel
  // hash pass needs their inputs.
  std::vector<std::string> problems;
  auto cases = load_cases(set_dir, *manifest, &problems);
  if (!cases) return cases.status();

  VerifyReport rep;
  const Json& files = (*manifest)["files"];
  const auto hashes = VerifyHashes::compute(set_dir, *manifest, *cases);  // all cores; looked up below
  check_listed(set_dir, files, on_disk, hashes, rep);
  check_unlisted(set_dir, files, manifest->value("format", "") == std::string(kRunFormat), *walk, rep);
  if (manifest->contains("failed_cases"))
    for (auto& f : (*manifest)["failed_cases"])
      rep.mismatches.push_back(fmt::format("{}: generation failed for this case (manifest failed_cases)", json_text(f)));
  for (auto& p : problems) rep.mismatches.push_back(std::move(p));
  for (const auto& rc : *cases) check_case_tensors(rc, hashes, rep);
  // What compare relies on in each error-bound scale (scale_check.hpp): a hash proves a file is the
  // one the manifest lists, not that a scale in it can be what generate stored.
  for (auto& p : check_scale_format(*cases)) rep.mismatches.push_back(std::move(p));
  for (const auto& rc : *cases)
    for (auto& p : check_case_scales(rc)) rep.mismatches.push_back(std::move(p));
  if (manifest->value("partial", false) == true) {
    // The missing shards are in the set's selection (config.json or run_info.json), as merge wrote it.
    std::string missing;
    for (const char* desc : {"config.json", "run_info.json"})
      if (auto d = read_json(set_dir + "/" + desc); d && d->is_object())
        if (const auto sel = d->find("selection"); sel != d->end() && sel->is_object())
          if (const auto m = sel->find("missing_shards"); m != sel->end() && m->is_array() && !m->empty())
            missing = json_text(*m);
    rep.partial = fmt::format("{} is a PARTIAL set (merged with --allow-partial{}): it is not the whole sweep, "
                              "and compare --require-all fails on it",
                              set_dir, missing.empty() ? "" : ", missing shards " + missing);
  }
  return rep;
}

}  // namespace validate::cases
