// The exec layout file's "algorithms": which algorithm computed each result of an op, declared by
// the program's author and copied, per case, into the run record's info.algorithms (compare bounds
// each tensor by its algorithm's model: docs/compare.md, "Algorithm-aware bounds").
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "exec_runner_parts.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/suggest.hpp"
#include "validate/layout/preset.hpp"

namespace validate::runners::exec {

Result<DeclaredAlgorithms> algorithms_in_file(const layout::LayoutSet& set) {
  DeclaredAlgorithms out;
  std::error_code ec;
  for (const auto& p : layout::preset_names())
    if (set.name == p) return out;
  if (set.name.empty() || !std::filesystem::is_regular_file(set.name, ec)) return out;
  auto doc = read_json(set.name);
  if (!doc) return doc.status();
  if (!doc->is_object() || !doc->contains("algorithms")) return out;
  const std::string& path = set.name;
  const Json& a = (*doc)["algorithms"];
  if (!a.is_object())
    return Error{fmt::format("{}: \"algorithms\" must be an object {{\"<op>\": {{\"<tensor>\": \"<algorithm>\"}}}}",
                             path)};
  for (const auto& [op, tensors] : a.items()) {
    const auto& names = layout::tensor_names(op);
    if (names.empty())
      return Error{fmt::format("{}: algorithms: unknown op '{}' (ops: {}){}", path, op,
                               fmt::join(layout::op_names(), ", "), did_you_mean(op, layout::op_names()))};
    if (!tensors.is_object())
      return Error{fmt::format("{}: algorithms.{} must be an object mapping result tensors to algorithms", path, op)};
    for (const auto& [tensor, name] : tensors.items()) {
      if (std::find(names.begin(), names.end(), tensor) == names.end())
        return Error{fmt::format("{}: algorithms.{}: unknown tensor '{}' (tensors of {}: {}){}", path, op, tensor, op,
                                 fmt::join(names, " "), did_you_mean(tensor, names))};
      const std::string text = name.is_string() ? name.get<std::string>() : name.dump();
      auto alg = name.is_string() ? cases::parse_algorithm(text) : std::nullopt;
      if (!alg)
        return Error{fmt::format("{}: algorithms.{}.{}: unknown algorithm {} (algorithms: {}){}", path, op, tensor,
                                 name.is_string() ? "'" + text + "'" : text, fmt::join(cases::algorithm_names(), ", "),
                                 did_you_mean(text, cases::algorithm_names()))};
      out[op][tensor] = *alg;
    }
  }
  return out;
}

// What the record says for one case: the declared algorithm where the case's geometry admits it,
// "direct" where it does not (a Winograd program runs a 5x5 or strided convolution directly, as
// cuDNN, oneDNN and NNPACK do), and nothing for a tensor the file does not name.
std::map<std::string, std::string> algorithms_for(const DeclaredAlgorithms& d, const std::string& op,
                                                  const ops::OpParams& p) {
  std::map<std::string, std::string> out;
  auto it = d.find(op);
  if (it == d.end()) return out;
  for (const auto& [tensor, alg] : it->second)
    out[tensor] = cases::algorithm_name(cases::applicable(alg.kind, p) ? alg : cases::Algorithm{});
  return out;
}

}  // namespace validate::runners::exec
