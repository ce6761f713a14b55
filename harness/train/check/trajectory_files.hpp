#pragma once
// The tensor files of one training case's op, reference and run side, for the checkpoint checks
// (trajectory_checkpoint.cpp, trajectory_own_update.cpp). A file that is missing, unreadable or of
// another shape reads as nothing: its own entry reports it.
#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "validate/train/trajectory_check.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/npy.hpp"

namespace validate::compare::detail {

inline const cases::TensorInfo* find_tensor(const std::vector<cases::TensorInfo>& all, const std::string& name) {
  for (const auto& t : all)
    if (t.name == name) return &t;
  return nullptr;
}

inline bool produced(const cases::OpRunRecord* run, const std::string& tensor) {
  return run && std::find(run->produced.begin(), run->produced.end(), tensor) != run->produced.end();
}

inline std::optional<Tensor> load(const std::string& path, const Shape& shape) {
  if (!fs::exists(path)) return std::nullopt;
  auto t = npy::read(path);
  if (!t || t->shape() != shape) return std::nullopt;
  return std::move(*t);
}

struct CaseFiles {
  const CheckpointDiagnosisInput& in;
  std::string ref_path(const std::string& tensor) const {
    return (std::filesystem::path(in.ref->dtype_dir) / in.ref->c.file_name(in.op, tensor)).string();
  }
  std::string run_path(const std::string& tensor) const {
    return (std::filesystem::path(in.run_dir) / in.ref->c.file_name(in.op, tensor)).string();
  }
  std::optional<Tensor> ref(const std::string& tensor, const Shape& shape) const { return load(ref_path(tensor), shape); }
  std::optional<Tensor> run(const std::string& tensor, const Shape& shape) const { return load(run_path(tensor), shape); }
};

}  // namespace validate::compare::detail
