#include "validate/compare/self_check.hpp"

#include <filesystem>

#include "validate/core/json_io.hpp"

namespace validate::compare {

namespace {

std::string str_at(const nlohmann::json& j, const char* a, const char* b = nullptr) {
  if (!j.is_object() || !j.contains(a)) return "";
  const nlohmann::json* p = &j[a];
  if (b) {
    if (!p->is_object() || !p->contains(b)) return "";
    p = &(*p)[b];
  }
  return p->is_string() ? p->get<std::string>() : "";
}

// "cuda:1" and "cuda" are the same kind of device; the index does not change the kernels.
std::string device_kind(const std::string& d) { return d.substr(0, d.find(':')); }

}  // namespace

std::string same_stack_reason(const std::string& ref_dir, const nlohmann::json& run_info) {
  if (str_at(run_info, "backend") != "torch") return "";
  // Through read_json like every input: bounded in size and depth (a deep one crashed the dumps).
  const auto read = read_json((std::filesystem::path(ref_dir) / "system_info.json").string());
  if (!read || !read->is_object()) return "";
  const nlohmann::json& sys = *read;
  const std::string ref_dev = device_kind(str_at(sys, "device"));
  std::string run_dev = str_at(run_info, "runner", "device");
  if (run_dev.empty()) run_dev = str_at(run_info, "device");
  run_dev = device_kind(run_dev);
  if (ref_dev.empty() || ref_dev != run_dev) return "";
  const std::string ref_v = str_at(sys, "libtorch_version");
  const std::string run_v = str_at(run_info, "runner", "libtorch_version");
  // Two LibTorch versions may pick different kernels: that is a (weak) cross-stack check.
  if (!ref_v.empty() && !run_v.empty() && ref_v != run_v) return "";
  return "LibTorch " + (run_v.empty() ? ref_v : run_v) + " on " + run_dev +
         " made both the references and the run: a self-check of the plumbing (layouts, files, "
         "hashes), not of agreement between two stacks";
}

}  // namespace validate::compare
