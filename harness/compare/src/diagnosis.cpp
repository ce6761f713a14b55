#include "validate/compare/diagnosis.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

#include <fmt/format.h>

#include "layout_mapping.hpp"
#include "validate/compare/ulp.hpp"
#if defined(VALIDATE_LAYOUT_AVAILABLE)
#include "validate/layout/spec.hpp"
#endif
#if defined(VALIDATE_LAYOUT_PERMUTE)
#include "validate/layout/permute.hpp"
#endif

namespace validate::compare {

namespace {

using detail::LayoutMapping;

float read_value(const ArrayView& v, std::int64_t i) {
  switch (v.storage) {
    case DType::float16: {
      std::uint16_t h;
      std::memcpy(&h, v.data + i * 2, 2);
      return float16_bits_to_float(h);
    }
    case DType::float64: {
      double d;
      std::memcpy(&d, v.data + i * 8, 8);
      return static_cast<float>(d);
    }
    default: {
      float f;
      std::memcpy(&f, v.data + i * 4, 4);
      return f;
    }
  }
}

// The element test of the gate (metrics.hpp), scalar. With no element gate configured, a guarded
// relative error of 1e-2 stands in, so "agrees" still means something.
struct ElementTest {
  float floor = 0, atol = 0, rtol = 0;
  std::uint64_t max_ulp = ~std::uint64_t{0};
  DType logical = DType::float32;
  bool beyond(float r, float x) const {
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
};

struct Eval {
  double max_abs = 0;
  std::int64_t beyond = 0, checked = 0;
  void add(float r, float x, const ElementTest& t) {
    ++checked;
    if (t.beyond(r, x)) ++beyond;
    const double d = std::fabs(static_cast<double>(x) - r);
    if (!(d <= max_abs)) max_abs = std::isnan(d) ? INFINITY : d;
  }
};

// Deterministic, stratified sample of flat indices (a hash jitter inside each stratum keeps the
// sample from aliasing with an axis period).
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

Eval eval_mapping(const DiagnosisInput& in, const ElementTest& t, const LayoutMapping& m,
                  const std::vector<std::int64_t>& positions) {
  Eval e;
  std::int64_t idx[16];
  for (std::int64_t p : positions) {
    unravel(p, in.shape, idx);
    e.add(read_value(in.ref, p), read_value(in.run, m.offset(idx)), t);
  }
  return e;
}

// Every element. With validate::layout, the run is gathered into canonical order by its strided
// permute engine a slab at a time (at most 16M elements in memory) and compared sequentially;
// without it, positions are walked with an odometer.
Eval eval_mapping_all(const DiagnosisInput& in, const ElementTest& t, const LayoutMapping& m) {
  Eval e;
#if defined(VALIDATE_LAYOUT_PERMUTE)
  const std::vector<std::int64_t> strides = m.src_strides();
  const std::int64_t offset = m.src_offset();
  const Shape inner(in.shape.begin() + 1, in.shape.end());
  const std::int64_t inner_n = std::max<std::int64_t>(1, shape_numel(inner));
  const std::int64_t rows = std::max<std::int64_t>(1, (std::int64_t{1} << 24) / inner_n);
  const std::size_t es = dtype_size(in.run.storage);
  std::vector<std::byte> buf(static_cast<std::size_t>(std::min(rows, in.shape[0]) * inner_n) * es);
  for (std::int64_t r0 = 0; r0 < in.shape[0]; r0 += rows) {
    const std::int64_t nr = std::min(rows, in.shape[0] - r0);
    Shape slab = inner;
    slab.insert(slab.begin(), nr);
    layout::permute_copy(in.run.data, buf.data(), es, slab, strides, offset + r0 * strides[0]);
    const ArrayView got{buf.data(), in.run.storage, nr * inner_n, false};
    for (std::int64_t j = 0; j < nr * inner_n; ++j)
      e.add(read_value(in.ref, r0 * inner_n + j), read_value(got, j), t);
  }
#else
  const std::size_t rank = in.shape.size();
  std::vector<std::int64_t> idx(rank, 0);
  const std::int64_t n = shape_numel(in.shape);
  for (std::int64_t p = 0; p < n; ++p) {
    e.add(read_value(in.ref, p), read_value(in.run, m.offset(idx.data())), t);
    for (std::size_t a = rank; a-- > 0;) {
      if (++idx[a] < in.shape[a]) break;
      idx[a] = 0;
    }
  }
#endif
  return e;
}

std::string letters(const std::string& axes, const std::vector<int>& perm) {
  std::string s;
  for (int a : perm) s += axes[static_cast<std::size_t>(a)];
  return s;
}

std::string flip_letters(const std::string& axes, const std::vector<bool>& flip) {
  std::string s;
  for (std::size_t a = 0; a < flip.size(); ++a)
    if (flip[a]) s += axes[a];
  return s;
}

std::string flip_words(const std::string& f) {
  if (f.size() == 1) return std::string(1, f[0]) + " flipped";
  std::string s;
  for (std::size_t i = 0; i < f.size(); ++i)
    s += (i ? (i + 1 == f.size() ? " and " : ", ") : "") + std::string(1, f[i]);
  return s + " flipped";
}

struct Candidate {
  LayoutMapping m;
  Hypothesis h;
};

// Words for one mapping: what was done to the bytes, and the mistake that usually does it.
void describe(const DiagnosisInput& in, Candidate& c) {
  const auto& m = c.m;
  const std::size_t rank = m.shape.size();
  const std::string& ax = in.axes;
  std::vector<int> id(rank), rev(rank);
  std::iota(id.begin(), id.end(), 0);
  for (std::size_t a = 0; a < rank; ++a) rev[a] = static_cast<int>(rank - 1 - a);
  std::vector<int> moved;
  for (std::size_t a = 0; a < rank; ++a)
    if (m.perm[a] != static_cast<int>(a)) moved.push_back(static_cast<int>(a));
  const std::string stored = letters(ax, m.perm), flips = flip_letters(ax, m.flip);
  const bool is_weight = ax == "OIHW";
  const bool is_act = ax == "NCHW";
  std::string spec = stored + (flips.empty() ? "" : "+flip=" + flips);
  std::string how, cause;
  if (moved.empty()) {
    how = "with " + flip_words(flips);
    if (flips == "HW" && is_weight)
      cause =
          in.tensor.rfind("grad", 0) == 0
              ? "a weight gradient returned in the flipped filter layout of CUDNN_CONVOLUTION mode"
              : "a filter flipped for CUDNN_CONVOLUTION mode";
    else if (flips == "HW" && is_act)
      cause = "a spatial flip applied to the data instead of the weights";
    else
      cause = "a flip applied to one spatial axis only";
  } else if (m.perm == rev && rank > 2) {
    spec = ax + ":F" + (flips.empty() ? "" : "+flip=" + flips);
    how = "read in Fortran (column-major) order" +
          (flips.empty() ? "" : " with " + flip_words(flips));
    cause = "a column-major (Fortran) array handed over as C order";
  } else if (moved.size() == 2) {
    const char x = ax[static_cast<std::size_t>(moved[0])],
               y = ax[static_cast<std::size_t>(moved[1])];
    how = fmt::format("with {} and {} swapped (its bytes are {})", x, y, stored) +
          (flips.empty() ? "" : " and " + flip_words(flips));
    if (rank == 2)
      cause = ax == "KN"   ? "a [K,N] matrix returned as [N,K] (a Linear weight's [out,in] layout)"
              : ax == "MN" ? "the output written transposed"
                           : "a transposed matrix (the C-vs-Fortran order of a 2-D array)";
    else if ((x == 'H' && y == 'W') || (x == 'W' && y == 'H'))
      cause = m.shape[2] == m.shape[3]
                  ? "H and W exchanged, which the shape of a square tensor cannot show"
                  : "H and W exchanged";
    else if (is_weight && ((x == 'O' && y == 'I') || (x == 'I' && y == 'O')))
      cause = "O and I exchanged (a transposed-convolution IOHW filter)";
    else
      cause = fmt::format("{} and {} exchanged by the writer", x, y);
  } else {
    how = fmt::format("read as {} (C order; the same bytes as {}:F)", stored,
                      letters(ax,
                              [&] {
                                std::vector<int> r(m.perm.rbegin(), m.perm.rend());
                                return r;
                              }())) +
          (flips.empty() ? "" : " with " + flip_words(flips));
    if ((is_act && stored == "NHWC") || (is_weight && stored == "OHWI"))
      cause = "channels-last data labelled as channels-first";
    else
      cause = "the run's bytes are in " + stored + " layout";
  }
#if defined(VALIDATE_LAYOUT_AVAILABLE)
  // Spell the hypothesis the way validate::layout does (and so the way a layout file would).
  if (auto parsed = layout::parse_spec(spec, ax)) spec = layout::to_string(*parsed);
#endif
  if (!in.declared_layout.empty() && in.declared_layout != spec)
    cause += " (its layout was declared as " + in.declared_layout + ")";
  c.h.spec = spec;
  c.h.description = how;
  c.h.cause = cause;
}

std::vector<Candidate> layout_candidates(const DiagnosisInput& in) {
  std::vector<Candidate> out;
  const std::size_t rank = in.shape.size();
  if (rank < 2 || rank > 6 || in.axes.size() != rank) return out;
  const bool spatial = rank == 4 && in.axes[2] == 'H' && in.axes[3] == 'W';
  std::vector<std::vector<bool>> flips = {std::vector<bool>(rank, false)};
  if (spatial) {
    for (auto f : {std::pair<bool, bool>{true, true}, {true, false}, {false, true}}) {
      std::vector<bool> v(rank, false);
      v[2] = f.first;
      v[3] = f.second;
      flips.push_back(v);
    }
  }
  std::vector<int> id(rank);
  std::iota(id.begin(), id.end(), 0);
  std::vector<std::vector<int>> swaps, reversal, others;
  std::vector<int> p = id;
  while (std::next_permutation(p.begin(), p.end())) {
    int moved = 0;
    for (std::size_t a = 0; a < rank; ++a) moved += p[a] != static_cast<int>(a);
    bool rev = true;
    for (std::size_t a = 0; a < rank; ++a) rev &= p[a] == static_cast<int>(rank - 1 - a);
    (moved == 2 ? swaps : rev ? reversal : others).push_back(p);
  }
  std::vector<std::vector<std::pair<std::int64_t, bool>>> seen;
  auto add = [&](const std::vector<int>& perm, const std::vector<bool>& flip) {
    Candidate c{LayoutMapping::make(in.shape, perm, flip), {}};
    if (c.m.is_identity()) return;
    if (in.run_shape != in.shape && c.m.stored_shape() != in.run_shape) return;
    auto sig = c.m.signature();
    if (std::find(seen.begin(), seen.end(), sig) != seen.end()) return;
    seen.push_back(sig);
    describe(in, c);
    out.push_back(std::move(c));
  };
  // Simplest first: flips alone, the Fortran reading, single swaps, other orders; then with flips.
  // The Fortran reading goes before the swaps because, with a size-1 axis (batch 1: every case of
  // the default sweep), its bytes are also those of one swap (NCHW:F = C<->W when N = 1), and the
  // first of equivalent mappings is the one named: a column-major writer is the likelier mistake.
  const std::vector<std::vector<std::vector<int>>*> groups = {&reversal, &swaps, &others};
  for (std::size_t f = 1; f < flips.size(); ++f) add(id, flips[f]);
  for (auto* group : groups)
    for (auto& perm : *group) add(perm, flips[0]);
  for (std::size_t f = 1; f < flips.size(); ++f)
    for (auto* group : groups)
      for (auto& perm : *group) add(perm, flips[f]);
  return out;
}

// Outputs recomputed from the reference inputs with one operand misread.
struct Recompute {
  Hypothesis h;
  std::function<double(std::int64_t)> value;  // candidate value at a flat output index
};

std::vector<Recompute> recompute_candidates(const DiagnosisInput& in) {
  std::vector<Recompute> out;
  if (in.role != "output" || in.run_shape != in.shape) return out;
  auto has = [&](const char* n) { return in.inputs.count(n) && in.input_shapes.count(n); };
  if (in.op == "matmul" && has("A") && has("B") && in.shape.size() == 2) {
    const Shape& as = in.input_shapes.at("A");
    const Shape& bs = in.input_shapes.at("B");
    if (as.size() != 2 || bs.size() != 2) return out;
    const std::int64_t M = as[0], K = as[1], N = bs[1];
    if (bs[0] != K || in.shape[0] != M || in.shape[1] != N) return out;
    const ArrayView A = in.inputs.at("A"), B = in.inputs.at("B");
    out.push_back({{"matmul:B=NK", "recomputed as A times B with B's bytes read as [N,K]",
                    "B read in NK layout (a Linear weight's [out,in]) instead of KN"},
                   [=](std::int64_t i) {
                     const std::int64_t m = i / N, n = i % N;
                     double s = 0;
                     for (std::int64_t k = 0; k < K; ++k)
                       s +=
                           static_cast<double>(read_value(A, m * K + k)) * read_value(B, n * K + k);
                     return s;
                   }});
    out.push_back({{"matmul:A=KM", "recomputed as A times B with A's bytes read as [K,M]",
                    "A read in KM (column-major) layout instead of MK"},
                   [=](std::int64_t i) {
                     const std::int64_t m = i / N, n = i % N;
                     double s = 0;
                     for (std::int64_t k = 0; k < K; ++k)
                       s +=
                           static_cast<double>(read_value(A, k * M + m)) * read_value(B, k * N + n);
                     return s;
                   }});
  }
  if (in.op == "conv2d" && has("input") && has("weight") && in.shape.size() == 4) {
    const Shape xs = in.input_shapes.at("input"), ws = in.input_shapes.at("weight");
    if (xs.size() != 4 || ws.size() != 4) return out;
    const ConvGeometry g = in.conv;
    const ArrayView X = in.inputs.at("input"), Wt = in.inputs.at("weight");
    const bool bias = g.bias && has("bias");
    const ArrayView Bv = bias ? in.inputs.at("bias") : ArrayView{};
    const Shape os = in.shape;
    if (os[1] != ws[0] || g.groups < 1 || ws[0] % g.groups) return out;
    out.push_back(
        {{"conv2d:weight+flip=HW", "recomputed with the filter spatially flipped",
          "a convolution where PyTorch computes a cross-correlation (CUDNN_CONVOLUTION mode with "
          "an unflipped filter)"},
         [=](std::int64_t i) {
           const std::int64_t ow = i % os[3], oh = (i / os[3]) % os[2],
                              o = (i / (os[3] * os[2])) % os[1], n = i / (os[3] * os[2] * os[1]);
           const std::int64_t cg = ws[1], kh = ws[2], kw = ws[3],
                              c0 = (o / (ws[0] / g.groups)) * cg;
           double s = bias ? read_value(Bv, o) : 0.0;
           for (std::int64_t c = 0; c < cg; ++c)
             for (std::int64_t u = 0; u < kh; ++u) {
               const std::int64_t y = oh * g.stride[0] - g.padding[0] + u * g.dilation[0];
               if (y < 0 || y >= xs[2]) continue;
               for (std::int64_t v = 0; v < kw; ++v) {
                 const std::int64_t x = ow * g.stride[1] - g.padding[1] + v * g.dilation[1];
                 if (x < 0 || x >= xs[3]) continue;
                 const double xv = read_value(X, ((n * xs[1] + c0 + c) * xs[2] + y) * xs[3] + x);
                 const double wv =
                     read_value(Wt, ((o * cg + c) * kh + (kh - 1 - u)) * kw + (kw - 1 - v));
                 s += xv * wv;
               }
             }
           return s;
         }});
  }
  return out;
}

}  // namespace

Diagnosis diagnose(const DiagnosisInput& in) {
  Diagnosis dx;
  const std::int64_t numel = shape_numel(in.shape);
  if (numel <= 1 || in.ref.numel != numel || in.run.numel != numel) return dx;
  ElementTest t;
  t.floor = static_cast<float>(in.floor);
  t.logical = in.logical;
  if (in.atol || in.rtol || in.max_ulp) {
    t.atol = static_cast<float>(in.atol.value_or(0));
    t.rtol = static_cast<float>(in.rtol.value_or(0));
    if (!in.atol && !in.rtol) t.atol = INFINITY;
    if (in.max_ulp) t.max_ulp = *in.max_ulp;
  } else {
    t.rtol = 1e-2f;
  }
  const auto positions = sample_positions(numel, in.sample);
  {
    Eval base;
    for (std::int64_t p : positions) base.add(read_value(in.ref, p), read_value(in.run, p), t);
    dx.baseline_max_abs = base.max_abs;
  }
  auto consider_closest = [&](const Hypothesis& h) {
    // A hypothesis is "closest" only if it cuts a finite error a hundredfold: against an infinite
    // baseline (a NaN/Inf mismatch) every error would qualify, inf included.
    if (h.passes || !std::isfinite(h.max_abs) || !(h.max_abs * 100 <= dx.baseline_max_abs)) return;
    if (!dx.closest || h.max_abs < dx.closest->max_abs) dx.closest = h;
  };

  for (auto& c : layout_candidates(in)) {
    ++dx.tried;
    Eval e = eval_mapping(in, t, c.m, positions);
    c.h.max_abs = e.max_abs;
    c.h.beyond = e.beyond;
    c.h.checked = e.checked;
    if (e.beyond == 0) {
      // Confirm beyond the sample: every element, or a 1M sample for huge tensors.
      Eval all = numel <= in.confirm_all_limit
                     ? eval_mapping_all(in, t, c.m)
                     : eval_mapping(in, t, c.m, sample_positions(numel, 1 << 20));
      c.h.max_abs = all.max_abs;
      c.h.beyond = all.beyond;
      c.h.checked = all.checked;
      c.h.confirmed_all = numel <= in.confirm_all_limit;
      c.h.passes = all.beyond == 0;
    }
    if (c.h.passes) dx.matches.push_back(c.h);
    consider_closest(c.h);
  }
  for (auto& rc : recompute_candidates(in)) {
    ++dx.tried;
    auto run_eval = [&](const std::vector<std::int64_t>& pos) {
      Eval e;
      for (std::int64_t p : pos) e.add(static_cast<float>(rc.value(p)), read_value(in.run, p), t);
      return e;
    };
    Eval e = run_eval(sample_positions(numel, std::min<std::int64_t>(in.sample, 1024)));
    if (e.beyond == 0) e = run_eval(sample_positions(numel, 16384));
    rc.h.max_abs = e.max_abs;
    rc.h.beyond = e.beyond;
    rc.h.checked = e.checked;
    rc.h.confirmed_all = e.checked == numel;
    rc.h.passes = e.beyond == 0;
    if (rc.h.passes) dx.matches.push_back(rc.h);
    consider_closest(rc.h);
  }

  const std::string subject = in.tensor.empty() ? "the run" : "run " + in.tensor;
  if (!dx.matches.empty()) {
    const Hypothesis& h = dx.matches.front();
    dx.summary = fmt::format("{} equals reference {} — {}?", subject, h.description, h.cause);
    if (!h.confirmed_all) dx.summary += fmt::format(" (checked on {} sampled elements)", h.checked);
    if (dx.matches.size() > 1) {
      std::string also;
      for (std::size_t i = 1; i < dx.matches.size() && i < 4; ++i)
        also += (i > 1 ? ", " : "") + dx.matches[i].spec;
      dx.summary += " Also consistent with: " + also + ".";
    }
  } else if (dx.closest) {
    dx.summary = fmt::format(
        "no usual layout mistake makes {} pass; closest: {} cuts the max error from {:.3g} to "
        "{:.3g} ({})",
        subject, dx.closest->description, dx.baseline_max_abs, dx.closest->max_abs,
        dx.closest->cause);
  }
  return dx;
}

}  // namespace validate::compare
