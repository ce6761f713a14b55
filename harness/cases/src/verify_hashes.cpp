#include "validate/cases/verify_hashes.hpp"

#include <filesystem>

#include "validate/core/fs.hpp"

namespace validate::cases {

namespace {
std::string normal(const std::string& p) { return std::filesystem::path(p).lexically_normal().generic_string(); }
}  // namespace

VerifyHashes VerifyHashes::compute(const std::string& set_dir, const Json& manifest, const std::vector<RefCase>& cases,
                                   int threads) {
  std::map<std::string, FileHashRequest> want;  // one request per file, even when listed and an input
  if (manifest.contains("files") && manifest["files"].is_object())
    for (auto& [rel, entry] : manifest["files"].items()) {
      auto path = fs::join_inside(set_dir, rel);
      if (path) want.emplace(normal(*path), FileHashRequest{*path, false});
    }
  for (const auto& rc : cases)
    for (const OpInstance& inst : rc.c.ops) {
      const Op op = inst.op();
      for (const auto& t : rc.c.tensors(op)) {
        std::string path = rc.dtype_dir + "/" + rc.c.file_name(op, t.name);
        auto& rq = want[normal(path)];
        if (rq.path.empty()) rq.path = path;
        if (t.role == Role::input)
          rq.value_hash = true;
        else
          rq.value_scan = true;  // NaN count and max|x| in the hash pass: verify_set() need not read it again
      }
    }
  std::vector<FileHashRequest> rqs;
  std::vector<std::string> keys;
  for (auto& [k, rq] : want) {
    keys.push_back(k);
    rqs.push_back(rq);
  }
  auto res = hash_files(rqs, threads);
  VerifyHashes out;
  for (std::size_t i = 0; i < res.size(); ++i)
    if (res[i].hashed) out.by_path_.emplace(keys[i], std::move(res[i]));
  return out;
}

const FileHashResult* VerifyHashes::find(const std::string& path) const {
  auto it = by_path_.find(normal(path));
  return it == by_path_.end() ? nullptr : &it->second;
}

std::optional<std::string> VerifyHashes::file_sha256(const std::string& path) const {
  const auto* r = find(path);
  if (!r) return std::nullopt;
  return r->sha256;
}

const FileHashResult* VerifyHashes::value(const std::string& path) const {
  const auto* r = find(path);
  return r && r->has_value ? r : nullptr;
}

const FileHashResult* VerifyHashes::scan(const std::string& path) const {
  const auto* r = find(path);
  return r && r->has_scan ? r : nullptr;
}

}  // namespace validate::cases
