// Helpers shared by the diagnosis families: values, element tests, samples, declared layouts and
// the readings of a tensor's bytes other than the declared one. The roundings are in
// diagnosis_rounding.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "diagnosis_internal.hpp"
#include "validate/ops/element.hpp"
#include "validate/metrics/ulp.hpp"
#include "validate/layout/convert.hpp"
#include "validate/layout/spec.hpp"

namespace validate::compare::detail {

float read_value(const ArrayView& v, std::int64_t i) { return ops::element_value(v.data, v.storage, i); }

bool ElementTest::beyond(float r, float x) const {
  if (!std::isfinite(r) || !std::isfinite(x)) {
    std::uint32_t a, b;
    std::memcpy(&a, &r, 4);
    std::memcpy(&b, &x, 4);
    return !((std::isnan(r) && std::isnan(x)) || a == b);
  }
  const float ar = std::fabs(r), d = std::fabs(x - r), g = ar > floor ? ar : floor;
  const float tol = std::max(atol, rtol * g);
  if (d > tol) return true;
  return ar >= floor && max_ulp != ~std::uint64_t{0} && ulp_distance(r, x, logical) > max_ulp;
}

bool ElementTest::beyond_at(std::int64_t p, float r, float x) const {
  if (beyond(r, x)) return true;
  if (!bound || !std::isfinite(r) || !std::isfinite(x)) return false;  // beyond() judged these
  return std::fabs(static_cast<double>(x) - static_cast<double>(r)) > bound->at(p, r, x);
}

BoundTest BoundTest::of(const DiagnosisInput::ElementBound& b) {
  // The gate's bound of two correct stacks (two_stack_bound), taken apart into its three linear terms.
  BoundTest t;
  t.scale = b.scale;
  t.unit = b.options.scale_unit;
  // The linear terms serve the scaled values (scaled()), which no stored term describes: an
  // output's bias-after route keeps its noise-model term there.
  const BoundOptions linear = without_after(b.options);
  const double c = two_stack_bound(0, 0, linear);
  t.constant = c;
  t.per_ref = two_stack_bound(1, 0, linear) - c;
  t.per_scale = two_stack_bound(0, 1, linear) - c;
  if (b.options.choice || b.options.after) t.choice = b.options;  // per element: two_stack_bound_at
  return t;
}

double BoundTest::at(std::int64_t p, double r, double x) const {
  double rho = static_cast<double>(read_value(scale, p)) * unit;
  if (!std::isfinite(rho)) rho = 0;
  if (choice) return two_stack_bound_at(r, rho, *choice, p, x);
  return per_ref * std::fabs(r) + per_scale * rho + constant;
}

BoundTest BoundTest::scaled(double f) const {
  BoundTest t = *this;
  t.choice.reset();  // the scaled values' bound: the noise model's, times |f|
  t.per_scale *= std::fabs(f);
  t.constant *= std::fabs(f);
  return t;
}

ElementTest gate_test(const DiagnosisInput& in) {
  ElementTest t;
  t.floor = static_cast<float>(in.floor);
  t.logical = in.logical;
  const bool bounded = in.bound && in.bound->scale.numel == shape_numel(in.shape);
  if (in.atol || in.rtol || in.max_ulp) {
    t.atol = static_cast<float>(in.atol.value_or(0));
    t.rtol = static_cast<float>(in.rtol.value_or(0));
    if (!in.atol && !in.rtol) t.atol = INFINITY;
    if (in.max_ulp) t.max_ulp = *in.max_ulp;
  } else if (bounded) {
    t.atol = INFINITY;  // the bound alone
  } else {
    t.rtol = 1e-2f;
  }
  if (bounded) t.bound = BoundTest::of(*in.bound);
  return t;
}

ElementTest recompute_test(const DiagnosisInput& in) {
  ElementTest t;
  t.floor = static_cast<float>(in.floor);
  t.logical = in.logical;
  const double dflt = in.logical == DType::bfloat16  ? 4e-2
                      : in.logical == DType::float16 ? 1e-2
                                                     : 5e-4;
  t.rtol = static_cast<float>(2 * std::max(dflt, in.rtol.value_or(0)));
  t.atol = static_cast<float>(2 * in.atol.value_or(0));
  return t;
}

void Eval::add(float r, float x, const ElementTest& t) {
  ++checked;
  if (t.beyond(r, x)) ++beyond;
  const double d = std::fabs(static_cast<double>(x) - r);
  if (!(d <= max_abs)) max_abs = std::isnan(d) ? INFINITY : d;
}

void Eval::add_at(std::int64_t p, float r, float x, const ElementTest& t) {
  ++checked;
  if (t.beyond_at(p, r, x)) ++beyond;
  const double d = std::fabs(static_cast<double>(x) - r);
  if (!(d <= max_abs)) max_abs = std::isnan(d) ? INFINITY : d;
}

bool declared_agrees(const DiagnosisInput& in, const ElementTest& t) {
  const std::int64_t numel = shape_numel(in.shape);
  if (in.run_shape != in.shape || in.ref.numel != numel || in.run.numel != numel) return false;
  const auto agree_on = [&](const std::vector<std::int64_t>& positions) {
    for (std::int64_t p : positions)
      if (t.beyond_at(p, read_value(in.ref, p), read_value(in.run, p))) return false;
    return true;
  };
  if (!agree_on(sample_positions(numel, in.sample))) return false;
  if (numel > in.confirm_all_limit) return agree_on(sample_positions(numel, 1 << 20));
  for (std::int64_t p = 0; p < numel; ++p)
    if (t.beyond_at(p, read_value(in.ref, p), read_value(in.run, p))) return false;
  return true;
}

std::vector<std::int64_t> sample_positions(std::int64_t numel, std::int64_t count) {
  std::vector<std::int64_t> out;
  if (numel <= count) {
    out.resize(static_cast<std::size_t>(numel));
    std::iota(out.begin(), out.end(), 0);
    return out;
  }
  const double step = static_cast<double>(numel) / static_cast<double>(count);
  for (std::int64_t k = 0; k < count; ++k) {
    std::uint64_t h = static_cast<std::uint64_t>(k) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    const auto lo = static_cast<std::int64_t>(static_cast<double>(k) * step);
    const auto width = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(static_cast<double>(k + 1) * step) - lo);
    out.push_back(
        std::min(numel - 1, lo + static_cast<std::int64_t>(h % static_cast<std::uint64_t>(width))));
  }
  return out;
}

void unravel(std::int64_t flat, const Shape& shape, std::int64_t* idx) {
  for (std::size_t a = shape.size(); a-- > 0;) {
    idx[a] = shape[a] ? flat % shape[a] : 0;
    flat = shape[a] ? flat / shape[a] : 0;
  }
}

std::vector<std::int64_t> unravel_all(const std::vector<std::int64_t>& flat, const Shape& shape) {
  std::vector<std::int64_t> idx(flat.size() * shape.size());
  for (std::size_t k = 0; k < flat.size(); ++k) unravel(flat[k], shape, idx.data() + k * shape.size());
  return idx;
}

namespace {
std::vector<int> identity_perm(std::size_t r) {
  std::vector<int> p(r);
  std::iota(p.begin(), p.end(), 0);
  return p;
}

layout::Placement placement_of_spec(const std::string& spec, const std::string& axes,
                                    const Shape& shape) {
  const std::size_t r = shape.size();
  if (!spec.empty()) {
    if (auto parsed = layout::parse_spec(spec, axes); parsed && !parsed->is_scalar())
      return layout::placement(*parsed, axes, shape);
  }
  return layout::placement(shape, identity_perm(r), std::vector<bool>(r, false));
}
}  // namespace

DeclaredBytes declared_bytes(const ArrayView& canonical, const Shape& shape,
                             const std::string& axes, const std::string& declared_spec) {
  DeclaredBytes d;
  d.declared = placement_of_spec(declared_spec, axes, shape);
  d.view = canonical;
  if (layout::is_canonical(d.declared)) return d;
  const std::size_t es = dtype_size(canonical.storage);
  d.owned.resize(static_cast<std::size_t>(canonical.numel) * es);
  d.view.data = d.owned.data();
  // The layout module's blocked permute engine (a failing 3 GB tensor is converted in seconds).
  if (auto parsed = layout::parse_spec(declared_spec, axes); parsed && !parsed->is_scalar()) {
    layout::to_layout(canonical.data, d.owned.data(), es, shape, axes, *parsed);
    return d;
  }
  // Scatter canonical -> declared layout memory, element by element.
  const std::size_t r = shape.size();
  std::vector<std::int64_t> idx(r, 0);
  for (std::int64_t p = 0; p < canonical.numel; ++p) {
    std::memcpy(d.owned.data() + d.declared.offset_of(idx.data()) * static_cast<std::int64_t>(es),
                canonical.data + p * static_cast<std::int64_t>(es), es);
    for (std::size_t a = r; a-- > 0;) {
      if (++idx[a] < shape[a]) break;
      idx[a] = 0;
    }
  }
  d.view.data = d.owned.data();
  return d;
}

std::string spec_of(const layout::Placement& m, const std::string& axes) {
  std::string s;
  for (int a : m.memory_axes) s += axes[static_cast<std::size_t>(a)];
  std::string f;
  for (std::size_t a = 0; a < m.flipped.size(); ++a)
    if (m.flipped[a] && m.canonical_shape[a] > 1) f += axes[a];
  if (!f.empty()) s += "+flip=" + f;
  if (auto parsed = layout::parse_spec(s, axes)) return layout::to_string(*parsed);
  return s;
}

std::string in_notation_of(const std::string& spec, const std::string& declared, const std::string& axes,
                           bool with_other) {
  auto sp = layout::parse_spec(spec, axes);
  auto dp = layout::parse_spec(declared, axes);
  if (!sp || !dp || sp->is_scalar() || sp->fortran == dp->fortran) return spec;
  // The same bytes in the other memory order's notation: the axes reversed, the flips unchanged
  // (a flip is of a canonical axis, whatever the order).
  layout::Spec other = *sp;
  other.axes.assign(sp->axes.rbegin(), sp->axes.rend());
  other.fortran = !sp->fortran;
  if (!with_other) return layout::to_string(other);
  return layout::to_string(other) + " (" + layout::to_string(*sp) + " in " + (sp->fortran ? "Fortran" : "C") +
         " order)";
}

std::string declared_name(const DiagnosisInput& in, const std::string& tensor,
                          const std::string& axes) {
  auto it = in.declared.find(tensor);
  if (it != in.declared.end() && !it->second.empty()) return it->second;
  if (tensor == in.tensor && !in.declared_layout.empty()) return in.declared_layout;
  return axes;
}

void finish_recompute(Hypothesis& h, const Eval& e, std::int64_t numel) {
  h.max_abs = e.max_abs;
  h.beyond = e.beyond;
  h.checked = e.checked;
  h.confirmed_all = e.checked == numel;
  h.passes = e.beyond == 0 && e.checked > 0;
}

std::vector<Reading> readings(const Shape& shape, const std::string& axes,
                              const layout::Placement& declared, bool declared_fortran) {
  std::vector<Reading> out;
  const std::size_t r = shape.size();
  if (r < 2 || r > 6 || axes.size() != r) return out;
  const auto hpos = axes.find('H'), wpos = axes.find('W');
  const bool spatial = hpos != std::string::npos && wpos != std::string::npos;
  std::vector<std::string> flip_sets = {""};
  if (spatial) flip_sets = {"", "HW", "H", "W"};
  const std::vector<int>& dp = declared.memory_axes;
  std::vector<int> rev(dp.rbegin(), dp.rend()), hw = dp;
  if (spatial) {
    auto ih = std::find(hw.begin(), hw.end(), static_cast<int>(hpos));
    auto iw = std::find(hw.begin(), hw.end(), static_cast<int>(wpos));
    std::iter_swap(ih, iw);
  }
  std::vector<std::vector<int>> perms = {dp, rev};
  const std::vector<int> rev_hw(hw.rbegin(), hw.rend());  // the commonest pair: F order + H<->W
  // Channels-first vs channels-last: C moved from last to second, or from anywhere to last.
  std::vector<int> chan;
  const auto cpos = axes.find('C');
  if (spatial && cpos != std::string::npos && axes.find('N') != std::string::npos) {
    chan = dp;
    auto it = std::find(chan.begin(), chan.end(), static_cast<int>(cpos));
    const bool last = it + 1 == chan.end();
    chan.erase(it);
    chan.insert(last ? chan.begin() + 1 : chan.end(), static_cast<int>(cpos));
  }
  if (spatial) {
    perms.push_back(hw);
    if (!chan.empty() && chan != dp) perms.push_back(chan);
    perms.push_back(rev_hw);
  }
  std::vector<int> p = identity_perm(r);
  do {
    if (std::find(perms.begin(), perms.end(), p) == perms.end()) perms.push_back(p);
  } while (std::next_permutation(p.begin(), p.end()));
  std::vector<layout::Placement> seen = {declared};  // distinct by layout::same_offsets
  std::vector<std::ptrdiff_t> seen_at = {-1};        // index in `out` of each seen placement
  auto perm_code = [&](const std::vector<int>& q) -> std::string {
    if (q == dp) return "";
    if (q == rev) return r == 2 ? "transposed" : "fortran_order";
    if (spatial && q == hw) return "hw_swapped";
    if (spatial && q == rev_hw) return "fortran_order+hw_swapped";
    if (!chan.empty() && q == chan) return "channels_order";
    return "axes_permuted";
  };
  auto add = [&](const std::vector<int>& q, const std::string& f, int rank) {
    std::vector<bool> flip = declared.flipped;
    for (char c : f) {
      const auto a = axes.find(c);
      flip[a] = !flip[a];
    }
    Reading rd{layout::placement(shape, q, flip), "", perm_code(q), f, rank, {}};
    rd.spec = spec_of(rd.m, axes);
    auto hit = std::find_if(seen.begin(), seen.end(),
                            [&](const layout::Placement& p) { return layout::same_offsets(p, rd.m); });
    if (hit != seen.end()) {
      const std::ptrdiff_t at = seen_at[static_cast<std::size_t>(hit - seen.begin())];
      if (at >= 0) {  // one alias per code: the first (simplest) spelling
        Reading& first = out[static_cast<std::size_t>(at)];
        const std::string code = rd.code();
        bool known = first.code() == code;
        for (const auto& a : first.aliases) known = known || a.first == code;
        if (!known) first.aliases.emplace_back(code, rd.spec);
      }
      return;
    }
    seen.push_back(rd.m);
    seen_at.push_back(static_cast<std::ptrdiff_t>(out.size()));
    if (q == rev && r > 2 && !declared_fortran) {
      // The C-order bytes of the reversed axes are the declared axes in Fortran order: spell
      // them that way ("NCHW:F" rather than "WHCN").
      std::string f;
      for (std::size_t a = 0; a < r; ++a)
        if (flip[a] && shape[a] > 1) f += axes[a];
      std::string letters;
      for (int a : dp) letters += axes[static_cast<std::size_t>(a)];
      rd.spec = letters + ":F" + (f.empty() ? "" : "+flip=" + f);
      if (auto parsed = layout::parse_spec(rd.spec, axes)) rd.spec = layout::to_string(*parsed);
    }
    out.push_back(std::move(rd));
  };
  // Simplest first: flips alone, the Fortran reading, H/W exchanged, other orders; then the same
  // with flips. The Fortran reading goes before the swaps because, with a size-1 axis (batch 1),
  // its bytes are also those of one swap (NCHW:F = C<->W when N = 1), and the first of equivalent
  // readings is the one named: a column-major writer is the likelier mistake.
  for (std::size_t f = 1; f < flip_sets.size(); ++f) add(dp, flip_sets[f], 1);
  // declared, reversed, H<->W, channels order, reversed + H<->W: named before the others
  const std::size_t named_perms = std::min<std::size_t>(perms.size(), spatial ? (chan.empty() ? 4 : 5) : 2);
  for (std::size_t i = 1; i < perms.size(); ++i) add(perms[i], "", i < named_perms ? 2 : 4);
  for (std::size_t f = 1; f < flip_sets.size(); ++f)
    for (std::size_t i = 1; i < perms.size(); ++i)
      add(perms[i], flip_sets[f], i < named_perms ? 3 : 5);
  return out;
}

void add_aliases(const Reading& rd, Hypothesis& h) {
  if (rd.aliases.empty()) return;
  nlohmann::json a = nlohmann::json::array();
  for (const auto& [code, spec] : rd.aliases) a.push_back({{"code", code}, {"spec", spec}});
  h.params["same_bytes_as"] = a;
}

std::string axis_words(const std::string& f) {
  std::string s;
  for (std::size_t i = 0; i < f.size(); ++i)
    s += (i ? (i + 1 == f.size() ? " and " : ", ") : "") + std::string(1, f[i]);
  return s;
}

std::string written_name(const DiagnosisInput& in) {
  if (!in.in_memory) return in.tensor + ".bin";
  return in.tensor.empty() ? "the tensor under test" : in.tensor;
}

void Search::coincident(Hypothesis h) {
  ++dx.tried;
  dx.coincident.push_back(h.code + " (" + h.spec + ")");
}

void Search::add(Hypothesis h) {
  ++dx.tried;
  if (h.passes) {
    dx.matches.push_back(h);
    return;
  }
  if (!std::isfinite(h.max_abs) || h.checked == 0) return;
  if (!dx.closest || h.max_abs < dx.closest->max_abs) dx.closest = std::move(h);
}

}  // namespace validate::compare::detail

namespace validate::compare::detail {

DeclaredRecompute::DeclaredRecompute(const DiagnosisInput& in, std::function<double(std::int64_t)> value)
    : value_(std::move(value)) {
  if (in.bound && in.bound->scale.numel == shape_numel(in.shape)) bound_ = BoundTest::of(*in.bound);
}

double DeclaredRecompute::at(std::int64_t p) {
  auto it = cache_.find(p);
  if (it == cache_.end()) it = cache_.emplace(p, value_(p)).first;
  return it->second;
}

bool DeclaredRecompute::coincides(std::size_t count, const std::function<Predicted(std::size_t)>& predicted) {
  if (count == 0) return false;
  double largest = 0, worst_excess = 0;
  for (std::size_t k = 0; k < count; ++k) {
    const Predicted h = predicted(k);
    const double d = at(h.at), diff = std::fabs(h.value - d);
    if (!std::isfinite(diff)) return false;
    largest = std::max(largest, std::fabs(d));
    const double within = bound_ ? bound_->at(h.at, d, h.value) : 0;
    worst_excess = std::max(worst_excess, diff - within);
  }
  return worst_excess <= 1e-12 * largest;
}

std::int64_t canonical_at(const layout::Placement& m, std::int64_t offset) {
  const std::size_t r = m.canonical_shape.size();
  std::int64_t flat = 0;
  for (std::size_t a = 0; a < r; ++a) {
    const std::int64_t n = m.canonical_shape[a];
    std::int64_t i = n > 0 ? (offset / m.stride[a]) % n : 0;
    if (m.flipped[a]) i = n - 1 - i;
    flat = flat * n + i;
  }
  return flat;
}

}  // namespace validate::compare::detail
