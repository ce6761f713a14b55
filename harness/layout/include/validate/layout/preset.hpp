#pragma once
// Presets and layout files: one spec per op and tensor role, gradients included, because the
// gradient layout need not be the stored one (cuDNN returns dW in the filter descriptor's layout,
// which for the `fortran` preset is the flipped kernel). docs/layouts.md explains every entry.
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "validate/core/result.hpp"
#include "validate/layout/spec.hpp"

namespace validate::layout {

using TensorSpecs = std::map<std::string, Spec, std::less<>>;  // tensor name -> spec
using OpSpecs = std::map<std::string, TensorSpecs, std::less<>>;  // op -> tensors

// The ops (harness/ops registry) and the tensors of each, in the order case files list them.
const std::vector<std::string>& op_names();                         // the registry's: conv2d, matmul, ...
const std::vector<std::string>& tensor_names(std::string_view op);  // empty for an unknown op
// The canonical axes of a tensor ("NCHW", "OIHW", "IOHW", "O", "MK", "KN", "MN", "" for the loss), or
// nullopt for an unknown op or tensor.
std::optional<std::string_view> canonical_axes(std::string_view op, std::string_view tensor);

struct Preset {
  std::string name;
  OpSpecs ops;  // every op, every tensor
};

std::vector<std::string> preset_names();  // torch, channels_last, fortran, linear_in_out, linear_out_in
Result<Preset> preset(std::string_view name);

// What a run uses: a preset, or a file over the torch preset. Ops the file leaves out are absent,
// and the exec runner skips them (has_op).
struct LayoutSet {
  std::string name;            // preset name or file path
  std::string format = "bin";  // how the exec runner writes tensors: "bin" (raw) or "npy"
  OpSpecs ops;                 // present ops only, every tensor of each

  bool has_op(std::string_view op) const { return ops.find(op) != ops.end(); }
  // nullptr when the op is absent or the tensor unknown.
  const Spec* find(std::string_view op, std::string_view tensor) const;
};

// `preset_or_file`: a preset name, else a JSON file
//   {"format": "bin"|"npy", "base": "<preset>", "conv2d": {"input": "NHWC", ...}, "matmul": {...}}
// whose entries override the base preset (torch unless "base" says otherwise); "comment" is ignored.
// Unknown keys, ops, tensors and bad specs are errors naming the file and the entry.
Result<LayoutSet> load_layout(std::string_view preset_or_file);
LayoutSet from_preset(const Preset& p);

// For run_info.json: {"name": ..., "format": ..., "ops": {"conv2d": {"input": "NCHW", ...}, ...}}.
nlohmann::json to_json(const LayoutSet& set);

}  // namespace validate::layout
