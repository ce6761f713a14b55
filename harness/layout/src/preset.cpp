#include "validate/layout/preset.hpp"

#include <algorithm>
#include <cassert>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "validate/core/fs.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/suggest.hpp"
#include "validate/ops/registry.hpp"

namespace validate::layout {

namespace {

// The ops' tables, in registry order and each in its file order.
struct Tables {
  std::vector<std::string> ops;
  std::map<std::string, std::vector<std::pair<std::string, std::string>>, std::less<>> tensors;  // op -> (name, axes)
};
const Tables& tables() {
  static const Tables t = [] {
    Tables out;
    for (const ops::OpDef* d : ops::registry()) {
      out.ops.push_back(d->name());
      for (const auto& ti : d->tensors(ops::with_all_tensors(*d))) out.tensors[d->name()].emplace_back(ti.name, ti.canonical_axes);
    }
    return out;
  }();
  return t;
}

// Specs written in the source are known good; a typo here is a programming error.
Spec must(std::string_view text, std::string_view axes) {
  auto s = parse_spec(text, axes);
  assert(s.is_ok());
  return s ? *s : canonical_spec(axes);
}

// Every op's tensors at their canonical axes (each op's table, harness/ops/<op>/, with a bias so
// the optional tensors are listed too).
OpSpecs canonical_ops() {
  OpSpecs ops;
  for (const ops::OpDef* d : ops::registry())
    for (const auto& t : d->tensors(ops::with_all_tensors(*d))) ops[d->name()][t.name] = canonical_spec(t.canonical_axes);
  return ops;
}

std::string preset_list() {
  std::string s;
  for (const auto& n : preset_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

const std::vector<std::string>& op_names() { return tables().ops; }

const std::vector<std::string>& tensor_names(std::string_view op) {
  static const std::map<std::string, std::vector<std::string>, std::less<>> names = [] {
    std::map<std::string, std::vector<std::string>, std::less<>> m;
    for (const auto& [o, list] : tables().tensors)
      for (const auto& [name, axes] : list) m[o].push_back(name);
    return m;
  }();
  static const std::vector<std::string> none;
  auto it = names.find(op);
  return it == names.end() ? none : it->second;
}

std::optional<std::string_view> canonical_axes(std::string_view op, std::string_view tensor) {
  auto it = tables().tensors.find(op);
  if (it == tables().tensors.end()) return std::nullopt;
  for (const auto& [name, axes] : it->second)
    if (tensor == name) return std::string_view(axes);
  return std::nullopt;
}

std::vector<std::string> preset_names() {
  return {"torch", "channels_last", "fortran", "linear_in_out", "linear_out_in"};
}

Result<Preset> preset(std::string_view name) {
  Preset p{std::string(name), canonical_ops()};
  auto& ops = p.ops;
  const auto names = preset_names();
  if (std::find(names.begin(), names.end(), name) == names.end())
    return Error{fmt::format("unknown layout preset '{}' (presets: {}){}", name, preset_list(),
                             did_you_mean(std::string(name), names))};
  // torch is PyTorch's own (NCHW / OIHW, matmul's A[M,K] B[K,N] in C order): canonical everywhere.
  // Every other preset's entries are each op's (OpDef::preset, harness/ops/<op>/<op>.cpp).
  for (const ops::OpDef* d : ops::registry())
    for (const auto& [tensors, text] : d->preset(name))
      for (const char* t : tensors) ops[d->name()][t] = must(text, *canonical_axes(d->name(), t));
  return p;
}

const Spec* LayoutSet::find(std::string_view op, std::string_view tensor) const {
  auto o = ops.find(op);
  if (o == ops.end()) return nullptr;
  auto t = o->second.find(tensor);
  return t == o->second.end() ? nullptr : &t->second;
}

LayoutSet from_preset(const Preset& p) { return LayoutSet{p.name, "bin", p.ops}; }

Result<LayoutSet> load_layout(std::string_view arg) {
  for (const auto& n : preset_names())
    if (arg == n) return from_preset(*preset(n));
  const std::string path(arg);
  if (!fs::exists(path))
    return Error{fmt::format("layout '{}' is neither a preset ({}) nor an existing file{}", arg, preset_list(),
                             did_you_mean(path, preset_names()))};
  auto doc = read_json(path);
  if (!doc) return doc.status();
  const Json& j = *doc;
  if (!j.is_object()) return Error{path + ": a layout file is a JSON object {\"conv2d\": {...}, \"matmul\": {...}}"};

  std::string base = "torch";
  if (j.contains("base")) {
    if (!j["base"].is_string()) return Error{path + ": \"base\" must be a preset name (" + preset_list() + ")"};
    base = j["base"].get<std::string>();
  }
  auto bp = preset(base);
  if (!bp) return with_context(path + ": \"base\"", bp.message());
  LayoutSet out{path, "bin", {}};
  for (const auto& [key, value] : j.items()) {
    // "algorithms" (each result's algorithm) is the exec runner's to read (docs/layouts.md).
    if (key == "base" || key == "comment" || key == "algorithms") continue;
    if (key == "format") {
      if (!value.is_string() || (value != "bin" && value != "npy"))
        return Error{fmt::format("{}: \"format\" must be \"bin\" or \"npy\", not {}", path, json_text(value))};
      out.format = value.get<std::string>();
      continue;
    }
    if (tensor_names(key).empty())
      return Error{fmt::format("{}: unknown key '{}' (expected an op ({}), \"format\", \"base\", "
                               "\"algorithms\" or \"comment\")", path, key, fmt::join(op_names(), ", "))};
    if (!value.is_object())
      return Error{fmt::format("{}: \"{}\" must be an object mapping tensor names to layout specs", path, key)};
    TensorSpecs specs = bp->ops[key];  // entries the file leaves out keep the base preset's layout
    for (const auto& [tensor, text] : value.items()) {
      auto axes = canonical_axes(key, tensor);
      if (!axes) {
        std::string names;
        for (const auto& n : tensor_names(key)) names += (names.empty() ? "" : " ") + n;
        return Error{fmt::format("{}: {}: unknown tensor '{}' (tensors of {}: {})", path, key, tensor, key, names)};
      }
      if (!text.is_string())
        return Error{fmt::format("{}: {}.{}: a layout spec is a string like \"NHWC\", not {}", path, key, tensor,
                                 json_text(text))};
      auto spec = parse_spec(text.get<std::string>(), *axes);
      if (!spec) return Error{fmt::format("{}: {}.{}: {}", path, key, tensor, spec.message())};
      specs[tensor] = *spec;
    }
    out.ops[key] = std::move(specs);
  }
  return out;
}

nlohmann::json to_json(const LayoutSet& set) {
  nlohmann::json ops = nlohmann::json::object();
  for (const auto& [op, tensors] : set.ops)
    for (const auto& [tensor, spec] : tensors) ops[op][tensor] = to_string(spec);
  return {{"name", set.name}, {"format", set.format}, {"ops", ops}};
}

}  // namespace validate::layout
