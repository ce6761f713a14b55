#include "validate/layout/preset.hpp"

#include <cassert>

#include <fmt/format.h>

#include "validate/core/fs.hpp"
#include "validate/core/json_io.hpp"

namespace validate::layout {

namespace {

struct TensorRole {
  const char* op;
  const char* tensor;
  const char* axes;
};

// The canonical axes of every tensor (harness/cases lists the same in case.cpp: the reference files
// are stored in these layouts).
constexpr TensorRole kRoles[] = {
    {"conv2d", "input", "NCHW"},      {"conv2d", "weight", "OIHW"},      {"conv2d", "bias", "O"},
    {"conv2d", "target", "NCHW"},     {"conv2d", "output", "NCHW"},      {"conv2d", "loss", ""},
    {"conv2d", "grad_input", "NCHW"}, {"conv2d", "grad_weight", "OIHW"}, {"conv2d", "grad_bias", "O"},
    {"matmul", "A", "MK"},            {"matmul", "B", "KN"},             {"matmul", "target", "MN"},
    {"matmul", "output", "MN"},       {"matmul", "loss", ""},            {"matmul", "grad_A", "MK"},
    {"matmul", "grad_B", "KN"},
};

// Specs written in the source are known good; a typo here is a programming error.
Spec must(std::string_view text, std::string_view axes) {
  auto s = parse_spec(text, axes);
  assert(s.is_ok());
  return s ? *s : canonical_spec(axes);
}

OpSpecs canonical_ops() {
  OpSpecs ops;
  for (const auto& r : kRoles) ops[r.op][r.tensor] = canonical_spec(r.axes);
  return ops;
}

void set(OpSpecs& ops, const char* op, std::initializer_list<const char*> tensors, const char* text) {
  for (const char* t : tensors) ops[op][t] = must(text, *canonical_axes(op, t));
}

std::string preset_list() {
  std::string s;
  for (const auto& n : preset_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

const std::vector<std::string>& op_names() {
  static const std::vector<std::string> names{"conv2d", "matmul"};
  return names;
}

const std::vector<std::string>& tensor_names(std::string_view op) {
  static const std::map<std::string, std::vector<std::string>, std::less<>> names = [] {
    std::map<std::string, std::vector<std::string>, std::less<>> m;
    for (const auto& r : kRoles) m[r.op].push_back(r.tensor);
    return m;
  }();
  static const std::vector<std::string> none;
  auto it = names.find(op);
  return it == names.end() ? none : it->second;
}

std::optional<std::string_view> canonical_axes(std::string_view op, std::string_view tensor) {
  for (const auto& r : kRoles)
    if (op == r.op && tensor == r.tensor) return std::string_view(r.axes);
  return std::nullopt;
}

std::vector<std::string> preset_names() {
  return {"torch", "channels_last", "fortran", "linear_in_out", "linear_out_in"};
}

Result<Preset> preset(std::string_view name) {
  Preset p{std::string(name), canonical_ops()};
  auto& ops = p.ops;
  if (name == "torch") {
    // PyTorch's own: NCHW / OIHW, and matmul's A[M,K] B[K,N] in C order.
  } else if (name == "channels_last") {
    // torch.channels_last: activations NHWC and weights OHWI (cuDNN's NHWC filter format, KRSC).
    set(ops, "conv2d", {"input", "target", "output", "grad_input"}, "NHWC");
    set(ops, "conv2d", {"weight", "grad_weight"}, "OHWI");
  } else if (name == "fortran") {
    // A Fortran program's activations x(C,H,W,N): channel fastest, image slowest. In C terms the bytes
    // are NWHC — not NHWC: H and W trade places (cuDNN is given them through explicit strides).
    set(ops, "conv2d", {"input", "target", "output", "grad_input"}, "CHWN:F");
    // Its kernel w(KW,KH,I,O) is byte for byte C-order OIHW (cuDNN's KCRS filter), stored rotated by
    // 180 degrees for CUDNN_CONVOLUTION mode; cuDNN returns dW for the buffer it was given, so flipped
    // too (docs/layouts.md derives it).
    set(ops, "conv2d", {"weight", "grad_weight"}, "WHIO:F+flip=HW");
    // Column-major matrices A(M,K), B(K,N), Y(M,N), as cuBLAS and BLAS take them.
    set(ops, "matmul", {"A", "grad_A"}, "MK:F");
    set(ops, "matmul", {"B", "grad_B"}, "KN:F");
    set(ops, "matmul", {"target", "output"}, "MN:F");
  } else if (name == "linear_in_out") {
    // A Linear weight stored [in, out] (a Rust engine's): B[K,N] as it is.
    set(ops, "matmul", {"B", "grad_B"}, "KN");
  } else if (name == "linear_out_in") {
    // PyTorch nn.Linear's weight is [out, in]: B stored as [N,K].
    set(ops, "matmul", {"B", "grad_B"}, "NK");
  } else {
    return Error{fmt::format("unknown layout preset '{}' (presets: {})", name, preset_list())};
  }
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
    return Error{fmt::format("layout '{}' is neither a preset ({}) nor an existing file", arg, preset_list())};
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
    if (key == "base" || key == "comment") continue;
    if (key == "format") {
      if (!value.is_string() || (value != "bin" && value != "npy"))
        return Error{fmt::format("{}: \"format\" must be \"bin\" or \"npy\", not {}", path, value.dump())};
      out.format = value.get<std::string>();
      continue;
    }
    if (tensor_names(key).empty())
      return Error{fmt::format("{}: unknown key '{}' (expected the ops conv2d and matmul, \"format\", \"base\" or "
                               "\"comment\")", path, key)};
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
                                 text.dump())};
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
