#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "commands.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/shell_quote.hpp"
#include "validate/core/suggest.hpp"
#include "validate/layout/preset.hpp"
#include "validate/layout/probe.hpp"

namespace validate::cli {

namespace {

// "2,3,4,5" -> {2, 3, 4, 5}
Result<Shape> parse_shape(const std::string& text) {
  Shape s;
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, ',');) {
    char* end = nullptr;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end || v < 1 || v > (1 << 20)) return Error{"--shape '" + text + "': expected sizes like 2,3,4,5"};
    s.push_back(v);
  }
  if (s.empty() || s.size() > 6) return Error{"--shape '" + text + "': 1 to 6 sizes"};
  return s;
}

// A probe shape of `rank` axes, every one a different size (so a swap shows), batch > 1.
std::string default_shape(std::size_t rank) {
  static const char* by_rank[] = {"", "5", "3,5", "2,3,5", "2,3,4,5", "2,3,4,5,6", "2,3,4,5,6,7"};
  return by_rank[std::min<std::size_t>(rank, 6)];
}

// `--layout` names a set of specs (a preset, or a layout file) rather than one spec.
bool names_a_set(const std::string& layout) {
  for (const auto& p : layout::preset_names())
    if (layout == p) return true;
  return fs::exists(layout);
}

// The ready-to-paste commands for every tensor a set lays out (its loss, a scalar, left out).
std::string tensor_commands(const std::string& layout, const layout::LayoutSet& set) {
  std::string out;
  for (const auto& [op, specs] : set.ops)
    for (const auto& name : layout::tensor_names(op)) {
      auto it = specs.find(name);
      if (it == specs.end() || it->second.is_scalar()) continue;
      const std::string axes(*layout::canonical_axes(op, name));
      out += fmt::format("  validate probe --layout {} --tensor {:<28} # {} (canonical {})\n", shell_arg(layout),
                         op + "." + name, layout::to_string(it->second), axes);
    }
  return out;
}

struct Resolved {
  std::string spec, axes;
  std::string from;  // "fortran, conv2d.weight" when a preset or file gave the spec
};

// --layout SPEC [--axes AXES] | --layout SPEC --tensor OP.TENSOR | --layout PRESET|FILE --tensor OP.TENSOR.
Result<Resolved> resolve(const std::string& layout, const std::string& tensor, const std::string& axes) {
  const bool set = names_a_set(layout);
  if (tensor.empty()) {
    if (!set) return Resolved{layout, axes};
    auto ls = layout::load_layout(layout);
    if (!ls) return ls.status();
    return Error{fmt::format("--layout {}: {} holds a spec per op and tensor; say which tensor with "
                             "--tensor OP.TENSOR:\n{}",
                             layout, fs::exists(layout) ? "this layout file" : "this preset",
                             tensor_commands(layout, *ls))};
  }
  if (!axes.empty()) return Error{"--tensor gives the canonical axes; leave out --axes"};
  const auto dot = tensor.find('.');
  const std::string op = tensor.substr(0, dot), name = dot == std::string::npos ? "" : tensor.substr(dot + 1);
  if (layout::tensor_names(op).empty()) {
    std::string ops;
    for (const auto& o : layout::op_names()) ops += (ops.empty() ? "" : ", ") + o;
    return Error{fmt::format("--tensor '{}': expected OP.TENSOR with OP one of {} (e.g. conv2d.weight)", tensor, ops)};
  }
  const auto canonical = layout::canonical_axes(op, name);
  if (!canonical) {
    std::string names;
    for (const auto& n : layout::tensor_names(op)) names += (names.empty() ? "" : ", ") + n;
    return Error{fmt::format("--tensor '{}': {} has no tensor '{}' (its tensors: {})", tensor, op, name, names)};
  }
  if (canonical->empty()) return Error{fmt::format("--tensor '{}' is a scalar: there is nothing to lay out", tensor)};
  if (!set) return Resolved{layout, std::string(*canonical)};
  auto ls = layout::load_layout(layout);
  if (!ls) return ls.status();
  const layout::Spec* sp = ls->find(op, name);
  if (!sp) return Error{fmt::format("--layout {}: it lays out no {} (the exec runner skips that op)", layout, op)};
  return Resolved{layout::to_string(*sp), std::string(*canonical), layout + ", " + tensor};
}

}  // namespace

void register_probe(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand(
      "probe", "Write a small tensor whose values are their canonical flat index, in canonical layout and in a given layout");
  static std::string spec, shape_text, axes, tensor, out;
  sub->add_option("--layout", spec,
                  "Layout spec, e.g. CHWN:F or WHIO:F+flip=HW; or a preset (fortran, ...) or layout file with --tensor")
      ->required();
  sub->add_option("--tensor", tensor,
                  "OP.TENSOR, e.g. conv2d.weight: the tensor whose spec a preset or layout file gives, and its canonical axes");
  sub->add_option("--shape", shape_text,
                  "Canonical shape (every axis a different size shows swaps; default 2,3,4,5 for four axes, "
                  "3,5 for a matrix, 5 for a vector)");
  sub->add_option("--axes", axes, "Canonical axes (default: NCHW for activation letters, OIHW for weight letters, MK/KN/MN for matrices)");
  sub->add_option("--out", out, "Directory to write canonical.npy, layout.npy and layout.bin into");
  sub->callback([&exit_code] {
    auto resolved = resolve(spec, tensor, axes);
    if (!resolved) {
      std::cerr << "validate probe: " << resolved.message() << "\n";
      exit_code = 2;
      return;
    }
    std::string shape_arg = shape_text;
    if (shape_arg.empty()) {
      // Without --shape: as many axes as the tensor has, each a different size.
      std::string ax = resolved->axes;
      if (ax.empty())
        if (auto g = layout::guess_canonical_axes(resolved->spec)) ax = *g;
      shape_arg = default_shape(ax.empty() ? 4 : ax.size());
    }
    auto shape = parse_shape(shape_arg);
    if (!shape) {
      std::cerr << "validate probe: " << shape.message() << "\n";
      exit_code = 2;
      return;
    }
    auto probe = layout::make_probe(resolved->spec, *shape, resolved->axes);
    if (!probe) {
      // A misspelt preset reaches here as a spec that does not parse: name the preset it was meant to be.
      std::cerr << "validate probe: " << probe.message()
                << (resolved->from.empty() ? did_you_mean(spec, layout::preset_names()) : std::string()) << "\n";
      exit_code = 2;
      return;
    }
    // Equal sizes hide exactly the swaps a probe is for (H<->W on a square image).
    for (std::size_t i = 0; i < shape->size(); ++i)
      for (std::size_t j = i + 1; j < shape->size(); ++j)
        if ((*shape)[i] == (*shape)[j] && (*shape)[i] > 1)
          std::cerr << fmt::format("validate probe: warning: axes {} and {} are both {} long; a swap of "
                                   "them would not show (give every axis a different size)\n",
                                   probe->canonical_axes[i], probe->canonical_axes[j], (*shape)[i]);
    if (!resolved->from.empty()) std::cout << resolved->from << ": ";
    std::cout << layout::describe_probe(*probe);
    if (!out.empty()) {
      Status st = fs::make_dirs(out);
      if (st) st = npy::write(out + "/canonical.npy", probe->canonical);
      if (st) st = fs::write_atomic(out + "/layout.bin", probe->in_layout.bytes(), probe->in_layout.nbytes());
      // The same bytes as an .npy whose header says how to read them (axes in the spec's order,
      // fortran_order for :F), as `run --backend exec` writes inputs for a layout file with "npy".
      if (st)
        st = fs::write_atomic(out + "/layout.npy", probe->in_layout.bytes(), probe->in_layout.nbytes(),
                              npy::make_header(probe->in_layout.dtype(), probe->in_layout.shape(),
                                               probe->spec.fortran));
      if (!st) {
        std::cerr << "validate probe: " << st.message() << "\n";
        exit_code = 2;
        return;
      }
      std::cout << fmt::format("wrote {0}/canonical.npy, {0}/layout.npy and {0}/layout.bin (raw little-endian float32 in "
                               "the layout's memory order)\n", out);
    }
    exit_code = 0;
  });
}

}  // namespace validate::cli
