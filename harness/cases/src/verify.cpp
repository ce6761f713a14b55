#include "validate/cases/verify.hpp"

#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "validate/cases/refset.hpp"
#include "validate/cases/verify_hashes.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/sha256.hpp"

namespace validate::cases {

Result<VerifyReport> verify_set(const std::string& set_dir) {
  auto manifest = read_manifest(set_dir);
  if (!manifest) return manifest.status();
  VerifyReport rep;
  const auto hashes = VerifyHashes::compute(set_dir, *manifest);  // all cores; looked up below
  std::set<std::string> listed;
  for (auto& [rel, entry] : (*manifest)["files"].items()) {
    auto path = fs::join_inside(set_dir, rel);
    if (!path) return Error{set_dir + "/manifest.json: file '" + rel + "': " + path.message()};
    listed.insert(rel);
    ++rep.files_checked;
    if (!entry.is_object() || !entry.contains("sha256") || !entry["sha256"].is_string())
      return Error{set_dir + "/manifest.json: entry '" + rel + "' has no sha256"};
    if (!fs::exists(*path)) {
      rep.mismatches.push_back(fmt::format("{}: missing (listed in the manifest)", *path));
      continue;
    }
    auto pre = hashes.file_sha256(*path);
    auto h = pre ? Result<std::string>(*pre) : sha256_file(*path);
    if (!h) {
      rep.mismatches.push_back(fmt::format("{}: unreadable: {}", *path, h.message()));
      continue;
    }
    std::string want = entry["sha256"].get<std::string>();
    if (*h != want) rep.mismatches.push_back(fmt::format("{}: sha256 {} but the manifest says {}", *path, *h, want));
    if (entry.contains("size") && entry["size"].is_number_unsigned() &&
        entry["size"].get<std::uint64_t>() != std::filesystem::file_size(*path))
      rep.mismatches.push_back(fmt::format("{}: {} bytes but the manifest says {}", *path,
                                           std::filesystem::file_size(*path), entry["size"].get<std::uint64_t>()));
  }
  if (manifest->contains("failed_cases"))
    for (auto& f : (*manifest)["failed_cases"])
      rep.mismatches.push_back(fmt::format("{}: generation failed for this case (manifest failed_cases)", f.dump()));

  auto cases = load_cases(set_dir);
  if (!cases) return cases.status();
  for (const auto& rc : *cases) {
    for (Op op : {Op::conv2d, Op::matmul}) {
      if ((op == Op::conv2d && !rc.c.has_conv) || (op == Op::matmul && !rc.c.has_matmul)) continue;
      for (const auto& t : rc.c.inputs(op)) {
        std::string want = metadata_hash(rc.metadata, op, t.name);
        std::string path = rc.dtype_dir + "/" + rc.c.file_name(op, t.name);
        if (want.empty()) {
          rep.mismatches.push_back(fmt::format("{}: metadata has no sha256 for input '{}'", path, t.name));
          continue;
        }
        ++rep.inputs_checked;
        const FileHashResult* pre = hashes.value(path);
        auto tensor = pre ? Result<Tensor>(Tensor()) : npy::read(path);
        if (!tensor) {
          rep.mismatches.push_back(fmt::format("{}: {}", path, tensor.message()));
          continue;
        }
        const Shape& shape = pre ? pre->shape : tensor->shape();
        if (shape != t.shape) {
          rep.mismatches.push_back(fmt::format("{}: shape {} but metadata says {}", path, shape_to_string(shape),
                                               shape_to_string(t.shape)));
          continue;
        }
        std::string got = pre ? pre->value_sha256 : tensor_sha256(*tensor);
        if (got != want)
          rep.mismatches.push_back(fmt::format("{}: input '{}' values hash to {} but metadata says {}", path, t.name, got, want));
      }
    }
  }
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(set_dir, ec);
       it != std::filesystem::recursive_directory_iterator(); ++it) {
    if (!it->is_regular_file()) continue;
    std::string rel = std::filesystem::relative(it->path(), set_dir).generic_string();
    if (rel != "manifest.json" && !listed.count(rel)) rep.warnings.push_back(rel + ": present but not in the manifest");
  }
  return rep;
}

}  // namespace validate::cases
