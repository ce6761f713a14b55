#include "validate/layout/probe.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "validate/core/checked_shape.hpp"
#include "validate/layout/convert.hpp"

namespace validate::layout {

namespace {

// "(n=0 c=1 h=0 w=0)" for canonical flat index v.
std::string coords(std::int64_t v, const std::string& axes, const Shape& shape) {
  std::vector<std::int64_t> idx(shape.size());
  for (std::size_t a = shape.size(); a-- > 0;) {
    idx[a] = v % shape[a];
    v /= shape[a];
  }
  std::string s = "(";
  for (std::size_t a = 0; a < shape.size(); ++a)
    s += fmt::format("{}{}={}", a ? " " : "", static_cast<char>(std::tolower(static_cast<unsigned char>(axes[a]))), idx[a]);
  return s + ")";
}

void list(std::string& out, const Tensor& t, const ProbeResult& p, int max_elements) {
  const std::int64_t n = std::min<std::int64_t>(t.numel(), std::max(max_elements, 0));
  const float* v = t.data<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    const auto value = static_cast<std::int64_t>(v[i]);
    out += fmt::format("  mem[{}] = {}  {}\n", i, value, coords(value, p.canonical_axes, p.canonical_shape));
  }
  if (n < t.numel()) out += fmt::format("  ... ({} more)\n", t.numel() - n);
}

}  // namespace

Result<ProbeResult> make_probe(std::string_view spec_text, const Shape& shape, std::string_view axes_arg) {
  std::string axes(axes_arg);
  if (axes.empty()) {
    auto guessed = guess_canonical_axes(spec_text);
    if (!guessed) return guessed.status();
    axes = *guessed;
  }
  auto spec = parse_spec(spec_text, axes);
  if (!spec) return spec.status();
  if (shape.size() != axes.size())
    return Error{fmt::format("shape {} has {} sizes but the canonical axes {} need {}", shape_to_string(shape),
                             shape.size(), axes.empty() ? "(scalar)" : axes, axes.size())};
  for (auto d : shape)
    if (d < 1) return Error{fmt::format("shape {}: every size must be at least 1", shape_to_string(shape))};
  const auto checked = checked_numel(shape);
  if (!checked)
    return Error{fmt::format("shape {}: its element count overflows a 64-bit integer; a probe holds at most 2^24",
                             shape_to_string(shape))};
  const std::int64_t numel = *checked;
  if (numel > (std::int64_t{1} << 24))
    return Error{fmt::format("shape {} has {} elements; a probe holds at most 2^24 (float32 counts exactly "
                             "only that far)", shape_to_string(shape), numel)};
  ProbeResult p{*spec, axes, shape, Tensor(DType::float32, shape), Tensor()};
  float* v = p.canonical.data<float>();
  for (std::int64_t i = 0; i < numel; ++i) v[i] = static_cast<float>(i);
  p.in_layout = to_layout(p.canonical, axes, p.spec);
  return p;
}

std::string describe_probe(const ProbeResult& p, int max_elements) {
  const Placement pl = placement(p.spec, p.canonical_axes, p.canonical_shape);
  std::string written, memory;
  for (char c : p.spec.axes) written += c;
  for (int a : pl.memory_axes) memory += p.canonical_axes[static_cast<std::size_t>(a)];
  std::string out = fmt::format("layout {} of a {} tensor {} (value = canonical flat index)\n", to_string(p.spec),
                                p.canonical_axes.empty() ? "scalar" : p.canonical_axes,
                                shape_to_string(p.canonical_shape));
  if (!p.spec.is_scalar()) {
    out += fmt::format("  array axes as written: {} {}; memory order slowest -> fastest: {}{}\n", written,
                       shape_to_string(pl.layout_shape), memory,
                       p.spec.flip.empty() ? "" : fmt::format("; axes {} stored reversed", p.spec.flip));
  }
  out += fmt::format("canonical {} (C order, last axis fastest):\n", p.canonical_axes.empty() ? "scalar" : p.canonical_axes);
  list(out, p.canonical, p, max_elements);
  out += fmt::format("layout {} memory:\n", to_string(p.spec));
  list(out, p.in_layout, p, max_elements);
  return out;
}

}  // namespace validate::layout
