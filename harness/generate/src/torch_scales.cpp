// The error-bound scales of a case's outputs and gradients, computed by LibTorch next to the
// reference: the scale pass on squared operands, the dL/dy choice of bfloat16/float16 gradients,
// and the partial sums of an op fed a user's tensor (docs/compare.md, "Error bounds").
#include "torch_internal.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "validate/cases/refset.hpp"
#include "validate/ops/registry.hpp"

namespace validate::generate::detail {

namespace {

// The grid of a bfloat16/float16 dtype around values `g` on it (float32 tensors): the spacing
// above |g| (away from zero) and below it (toward zero; half as wide at a power of two).
struct GridSpacing {
  at::Tensor above, below;
};
GridSpacing grid_spacing(const at::Tensor& g, DType d) {
  const int p = d == DType::bfloat16 ? 8 : 11, emin = d == DType::bfloat16 ? -126 : -14;
  const at::Tensor a = g.abs();
  auto [m, e] = at::frexp(a);  // a = m 2^e, m in [0.5, 1)
  const at::Tensor il = at::where(a > 0, e - 1, at::full_like(e, emin)).clamp_min(emin);
  at::Tensor above = at::exp2((il - (p - 1)).to(at::kFloat));
  at::Tensor below = at::where((m == 0.5) & (il > emin), above * 0.5, above);
  return {above, below};
}

// How far v (float32) lies inside the interval that rounds to g (its value in the dtype): the
// distance to the nearer rounding boundary, negative outside it.
at::Tensor inside_distance(const at::Tensor& v, const at::Tensor& g, DType d) {
  const GridSpacing s = grid_spacing(g, d);
  const at::Tensor a = g.abs(), side = at::where(g < 0, -v, v);  // v measured on g's side of zero
  const at::Tensor off_zero = at::minimum(side - (a - s.below * 0.5), a + s.above * 0.5 - side);
  return at::where(g == 0, s.above * 0.5 - v.abs(), off_zero);
}

}  // namespace

at::Tensor round_to(const at::Tensor& t, DType d) { return t.to(compute_type(d)).to(at::kFloat); }

double gradient_reduction_length(const std::string& name, std::int64_t leaf_numel, double n_out, double k_op) {
  const double mine = static_cast<double>(std::max<std::int64_t>(leaf_numel, 1));
  return std::max(1.0, std::ceil(name == "bias" ? n_out / mine : n_out * k_op / mine));
}

constexpr double kChoiceLambda = 8;

// The float32 forward of the op's own (case-dtype) leaves, and Dg from it. `sum`: that forward
// already made from `leaves` with its graph kept (a case computed in float32); otherwise it is
// made here from float32 copies (a native bfloat16/float16 run on CUDA).
ChoiceTerms choice_deterministic(const ops::OpParams& params, const ops::TorchLeaves& leaves, const at::Tensor& y,
                                 const at::Tensor& target, DType d, const at::Tensor* sum) {
  ChoiceTerms c;
  ops::TorchLeaves lin;
  if (sum) {
    lin = leaves;
  } else {
    for (const auto& [name, t] : leaves) lin.emplace(name, t.detach().to(at::kFloat).requires_grad_(true));
  }
  at::Tensor z = sum ? *sum : ops::torch_forward(params, lin);
  c.y32 = z.detach();
  c.stored = y.detach().to(at::kFloat);
  c.fused_reference = sum != nullptr;
  const double two_n = 2.0 / static_cast<double>(c.stored.numel());
  c.dy = (c.stored - target) * two_n;
  const at::Tensor rounded = round_to(c.dy, d);  // the reference's dL/dy
  c.D = rounded - c.dy;
  // The moves from the reference's gradient, one per other legal route: dL/dy kept; with a bias
  // added after the stored sum, dL/dy of that output rounded, and kept.
  std::vector<at::Tensor> moves{c.D};
  if (auto b = lin.find("bias"); b != lin.end() && c.y32.dim() == 4) {
    const at::Tensor b4 = b->second.detach().to(at::kFloat).view({1, -1, 1, 1});  // output channels: axis 1
    c.sum = c.y32 - b4;
    c.after = round_to(round_to(c.sum, d) + b4, d);
    c.dy_after = (c.after - target) * two_n;
    moves.push_back(round_to(c.dy_after, d) - rounded);
    moves.push_back(c.dy_after - rounded);
  }
  std::vector<at::Tensor> inputs;
  std::vector<std::string> names;
  for (const auto& [name, t] : lin) inputs.push_back(t), names.push_back(name);
  for (std::size_t m = 0; m < moves.size(); ++m) {  // not accumulated into the leaves' .grad
    auto g = torch::autograd::grad({z}, inputs, {moves[m]}, /*retain_graph=*/m + 1 < moves.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (m == 0) c.dg.emplace(names[i], g[i].abs_());
      else c.dg.at(names[i]) = at::maximum(c.dg.at(names[i]), g[i].abs_());
    }
  }
  c.D = c.D.abs();
  for (std::size_t m = 1; m < moves.size(); ++m) c.D = at::maximum(c.D, moves[m].abs());
  return c;
}

// F_j and the root term of Z through the squared operands `sq` (their forward y2, the output's
// scale rho_y), at reduction length k of the output and n_max of the gradients.
namespace {

void choice_statistical(ChoiceTerms& c, const ops::TorchLeaves& sq, const at::Tensor& y2, const at::Tensor& rho_y,
                        DType d, double k, double n_max) {
  const double u = std::ldexp(1.0, -24);
  const double two_n = 2.0 / static_cast<double>(c.stored.numel());
  // Both stacks' float32 sums lie within kChoiceLambda times the direct sum's bound of exact.
  auto window = [&](const at::Tensor& v) {
    return 2 * kChoiceLambda * u * (std::sqrt(k) * (v.abs() + rho_y) + rho_y) + 2 * k * std::ldexp(1.0, -150);
  };
  // With 2/N a power of two, 2 (y - t) / N from a stored output is exact in float32 in any order
  // (y - t is exact wherever its rounding could reach a boundary of the case dtype: both lie on
  // its grid), so every stack that rounds to nearest even rounds it alike, ties included (a
  // fifth of bfloat16 dL/dy values are exact ties); only below float32's normal range may it not.
  int two_n_exp = 0;
  const bool exact_dy = std::frexp(two_n, &two_n_exp) == 0.5;
  // One route: `v` the float32 value the stack rounds to the stored output `out` (dL/dy from
  // it: dy). Where v may round the other way dL/dy moves by `step` (2/N the output's ULPs) and
  // its own rounding by one ULP; a dL/dy within float32 noise of a boundary moves one ULP (none
  // is, when dL/dy is exact); its float32 evaluation 2 u |dy| everywhere.
  auto route = [&](const at::Tensor& v_flips, const at::Tensor& step, const at::Tensor& dy) {
    const at::Tensor rounded = round_to(dy, d);
    at::Tensor dy_flips = inside_distance(dy, rounded, d) <= 4 * u * dy.abs() + std::ldexp(1.0, -149);
    if (exact_dy) dy_flips = dy_flips & (dy.abs() < std::ldexp(1.0, -100));
    const at::Tensor ulp_dy = grid_spacing(rounded.abs() + step, d).above;
    const at::Tensor zero = at::zeros_like(ulp_dy);
    return 2 * u * dy.abs() + at::where(v_flips, step + ulp_dy, zero) + at::where(dy_flips, ulp_dy, zero);
  };
  at::Tensor f = route(inside_distance(c.y32, c.stored, d) <= window(c.y32),
                       grid_spacing(c.stored, d).above * two_n, c.dy);
  at::Tensor spread = c.dy.abs();
  if (c.sum.defined()) {  // the bias added after the stored sum: round(s) may flip, then the output
    const at::Tensor s_rounded = round_to(c.sum, d);
    // s = y32 - bias carries that subtraction's rounding and y32's own beside the sum's.
    const at::Tensor s_flips = inside_distance(c.sum, s_rounded, d) <= window(c.sum) + 2 * u * (c.y32.abs() + c.sum.abs());
    const at::Tensor s_step = grid_spacing(s_rounded, d).above;
    const at::Tensor out_step = s_step + grid_spacing(c.after.abs() + s_step, d).above;
    f = at::maximum(f, route(s_flips, out_step * two_n, c.dy_after));
    spread = at::maximum(spread, c.dy_after.abs());
    // The output's own term W: the other route's stored output against the reference's, and
    // where another stack's round(s) may differ from this one's, one ULP of it and of the output.
    if (c.fused_reference)
      c.after_term = (c.after - c.stored).abs() + at::where(s_flips, out_step, at::zeros_like(out_step));
  }
  const at::Tensor a = spread + f + c.D;  // c.D: the largest |move| of any route
  const at::Tensor up = f.square() + (2 * n_max * u * u) * a.square();
  std::vector<at::Tensor> inputs;
  std::vector<std::string> names;
  for (const auto& [name, t] : sq)
    if (t.requires_grad()) inputs.push_back(t), names.push_back(name);
  c.y32 = c.stored = c.dy = c.D = c.sum = c.after = c.dy_after = at::Tensor();
  auto g = torch::autograd::grad({y2}, inputs, {up}, /*retain_graph=*/true);
  for (std::size_t i = 0; i < names.size(); ++i) {  // in place: the largest gradient is 300 MB
    at::Tensor z = std::move(c.dg.at(names[i]));
    z.add_(g[i].clamp_min_(0).sqrt_(), kChoiceLambda);
    g[i] = at::Tensor();
    c.spread.emplace(names[i], std::move(z));
  }
  c.dg.clear();
}

}  // namespace

// The error-bound scale pass (docs/compare.md, "Error bounds"). Every element of the output and of
// each gradient is a sum of products a_i b_i; its scale is sqrt(sum (a_i b_i)^2), which is the same
// bilinear op on squared operands: forward(x^2, w^2) (+ b^2: the bias is one more term), and each
// gradient the backward of that forward with the squared dL/dy magnitude m^2. m is |dL/dy| widened
// by what may move dL/dy = 2 (y - t) / N between two correct stacks, in units of the case dtype's
// unit roundoff u_d (compare multiplies the scale by u_d): the stored output's rounding (one ULP of
// the case dtype, <= 2 u_d |y|), the forward's float32 accumulation (sqrt(K + 1) u (|y| + rho_y),
// the bound's own model), and dL/dy's rounding to the case dtype where it is subnormal (an absolute
// half spacing). float32 throughout: a scale needs a few digits, and all its terms are positive.
// Returns the output's squared scale; `grads` receives the gradients' (with `only` non-empty, only
// those leaves'). The squared operands and the graph are gone when it returns: held until the
// square roots, the largest op's scales kept five copies of its operand at the peak.
at::Tensor scale_pass(const ops::OpParams& params, const ops::TorchLeaves& leaves, const at::Tensor& y,
                      const at::Tensor& target, DType d, cases::Op op, const std::vector<std::string>& only,
                      std::map<std::string, at::Tensor>& grads, ChoiceTerms* choice,
                      const at::Tensor* partial_sums) {
  const double u = std::ldexp(1.0, -24);
  const double ud = d == DType::bfloat16 ? std::ldexp(1.0, -8) : d == DType::float16 ? std::ldexp(1.0, -11) : u;
  const double half_subnormal = d == DType::bfloat16 ? std::ldexp(1.0, -134) : d == DType::float16 ? std::ldexp(1.0, -25) : std::ldexp(1.0, -150);
  const double k = static_cast<double>(ops::find(op).reduction_length(params)) + 1;
  ops::TorchLeaves sq;
  for (const auto& [name, t] : leaves) {
    at::Tensor s2 = t.detach().to(at::kFloat).square();
    const bool want = only.empty() || std::find(only.begin(), only.end(), name) != only.end();
    sq.emplace(name, want ? s2.requires_grad_(true) : s2);
  }
  at::Tensor y2 = ops::torch_forward(params, sq);
  at::Tensor rho_y = y2.detach().clamp_min(0).sqrt();
  at::Tensor yv = y.detach().to(at::kFloat).abs();
  const double n_out = static_cast<double>(yv.numel());
  const double round_out = d == DType::float32 ? 0.0 : 2.0;
  at::Tensor dy = (y.detach().to(at::kFloat) - target).abs() * (2.0 / n_out);
  // The forward's accumulation covers its partial sums: |y| + rho_y, or those measured on a user's
  // tensor (partial_sum_bounds), when larger.
  at::Tensor acc = partial_sums ? at::maximum(yv + rho_y, *partial_sums) : yv + rho_y;
  at::Tensor m = dy + (2.0 / n_out) * (round_out * yv + std::sqrt(k) * (u / ud) * acc) + half_subnormal / ud;
  acc = at::Tensor();
  // A gradient's accumulation term needs the root-sum-square of its actual products, whose dL/dy
  // factor is at most dy + u_d m; the widened m serves its u_p term. Both come from one backward
  // (it is linear in the squared upstream): S^2 = sum (n (u/u_d)^2 (dy + u_d m)^2 + m^2) x^2, with
  // n the largest reduction length among the gradients (as compare counts it), so that
  // u_d S >= sqrt(n u^2 rho_a^2 + u_d^2 rho_p^2) for every one (docs/compare.md, "Error bounds").
  double n_max = 1;
  for (const auto& [name, t] : sq)
    if (t.requires_grad()) n_max = std::max(n_max, gradient_reduction_length(name, t.numel(), n_out, k - 1));
  at::Tensor a = dy + ud * m;
  if (choice) choice_statistical(*choice, sq, y2, rho_y, d, k, n_max);
  y2.backward(m.square() + (n_max * (u / ud) * (u / ud)) * a.square());
  grads.clear();
  for (const auto& [name, t] : sq)
    if (t.requires_grad()) grads.emplace(name, t.grad());
  return y2.detach();
}

namespace {

// Partial sums on the data at hand (docs/compare.md, "Partial sums on the data at hand"). A
// correct stack's accumulation error is a walk over its partial sums s_k, bounded by
// lambda u sqrt(n) max|s_k|; the scale's model puts max|s_k| near |y| + rho, which holds for fills
// that draw every element alike, whatever the order, but not for a user's tensor ordered along the
// sum (weights of one sign over the first half of the channels climb to many times |y|). This
// measures, per element, a bound on |s_k| for every order that takes the sum in contiguous ranges
// of the reduction's index, nested as the op's canonical loop or with its outer axis innermost
// (NCHW and NHWC kernels), forward, backward or split into ranges, in any order inside a range:
// the index is cut into kPartialSumChunks chunks; with S_j the sum of the chunks before j, T_j and
// A_j the chunk's sum and sum of |terms|, every such partial sum is within
// (max S_j - min S_j) + 2 max (A_j + |T_j|) / 2 of zero (a range of chunks is a difference of two
// S_j; a chunk's own part is at most its larger signed half, (A_j + |T_j|) / 2, at each end).
// The op's bias, one more term, adds |bias|. One forward (and backward, for a gradient) of the op
// per chunk with the carrier operand zeroed outside it (ops::OpDef::reductions); float32.
struct PartialSumRange {
  at::Tensor s, hi, lo, half;
  void add(const at::Tensor& t, const at::Tensor& a) {
    if (!s.defined()) s = at::zeros_like(t), hi = at::zeros_like(t), lo = at::zeros_like(t), half = at::zeros_like(t);
    s.add_(t);
    hi = at::maximum(hi, s);
    lo = at::minimum(lo, s);
    half = at::maximum(half, (a + t.abs()) * 0.5);
  }
  at::Tensor bound() const { return hi - lo + 2 * half; }
};

// The position of each element of `carrier` along `nesting` (its reduction axes, outer to inner),
// flattened, shaped to broadcast over the carrier's other axes.
at::Tensor nested_index(const at::Tensor& carrier, const std::vector<int>& nesting) {
  std::vector<std::int64_t> sizes;
  for (int a : nesting) sizes.push_back(carrier.size(a));
  std::vector<int> sorted = nesting;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int64_t> perm, shape(static_cast<std::size_t>(carrier.dim()), 1);
  for (int a : sorted) {
    perm.push_back(std::find(nesting.begin(), nesting.end(), a) - nesting.begin());
    shape[static_cast<std::size_t>(a)] = carrier.size(a);
  }
  std::int64_t count = 1;
  for (auto s : sizes) count *= s;
  return at::arange(count, at::TensorOptions().dtype(at::kLong)).view(sizes).permute(perm).reshape(shape).to(carrier.device());
}

// The op on `in` with `carrier` multiplied by `mask` and the bias zeroed: for each of `tensors`,
// the output, or the gradient of the backward from `dy` (one forward and at most one backward for
// every tensor whose sum that carrier and its axes index: conv2d's grad_weight and grad_bias).
std::vector<at::Tensor> masked_pass(const ops::OpParams& params, const ops::TorchLeaves& in, const at::Tensor& dy,
                                    const std::string& carrier, const std::vector<std::string>& tensors,
                                    const at::Tensor& mask) {
  auto is_leaf_of = [&](const std::string& name) {
    return std::find(tensors.begin(), tensors.end(), "grad_" + name) != tensors.end();
  };
  ops::TorchLeaves l;
  for (const auto& [name, t] : in) {
    at::Tensor v = name == "bias" ? at::zeros_like(t) : name == carrier ? t * mask : t;
    l.emplace(name, is_leaf_of(name) ? v.detach().requires_grad_(true) : v);
  }
  at::Tensor y = ops::torch_forward(params, l);
  const bool backward = std::any_of(tensors.begin(), tensors.end(), [](const std::string& t) { return t != "output"; });
  if (backward) y.backward(carrier == "dy" ? dy * mask : dy);
  std::vector<at::Tensor> out;
  for (const auto& t : tensors) out.push_back(t == "output" ? y.detach() : l.at(t.substr(5)).grad().detach());
  return out;
}

// The op's reductions grouped by the carrier and axes that index them, in the op's order.
struct ReductionGroup {
  std::string carrier;
  std::vector<int> axes;
  std::vector<std::string> tensors;
};
std::vector<ReductionGroup> reduction_groups(cases::Op op) {
  std::vector<ReductionGroup> groups;
  for (const auto& r : ops::find(op).reductions()) {
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const ReductionGroup& x) { return x.carrier == r.carrier && x.axes == r.axes; });
    if (g == groups.end()) g = groups.insert(groups.end(), ReductionGroup{r.carrier, r.axes, {}});
    g->tensors.push_back(r.tensor);
  }
  return groups;
}

}  // namespace

// Per output and gradient of the op, the bound on every partial sum above (float32, the op's
// device); `dy` is dL/dy.
std::map<std::string, at::Tensor> partial_sum_bounds(const ops::OpParams& params, const ops::TorchLeaves& leaves,
                                                     const at::Tensor& dy, cases::Op op) {
  ops::TorchLeaves x, ax;
  for (const auto& [name, t] : leaves) {
    x.emplace(name, t.detach().to(at::kFloat));
    ax.emplace(name, x.at(name).abs());
  }
  const at::Tensor d = dy.detach().to(at::kFloat), ad = d.abs();
  std::map<std::string, at::Tensor> out;
  for (const auto& g : reduction_groups(op)) {
    std::vector<std::vector<int>> nestings{g.axes};
    if (g.axes.size() > 1) {
      std::vector<int> inner(g.axes.begin() + 1, g.axes.end());
      inner.push_back(g.axes.front());
      nestings.push_back(inner);
    }
    const at::Tensor& carrier = g.carrier == "dy" ? d : x.at(g.carrier);
    std::vector<at::Tensor> m(g.tensors.size());
    for (const auto& nesting : nestings) {
      const at::Tensor index = nested_index(carrier, nesting);
      const std::int64_t count = index.numel(), chunks = std::min<std::int64_t>(cases::kPartialSumChunks, count);
      std::vector<PartialSumRange> range(g.tensors.size());
      for (std::int64_t j = 0; j < chunks; ++j) {
        const at::Tensor mask = ((index >= j * count / chunks) & (index < (j + 1) * count / chunks)).to(at::kFloat);
        const auto t = masked_pass(params, x, d, g.carrier, g.tensors, mask);
        const auto a = masked_pass(params, ax, ad, g.carrier, g.tensors, mask);
        for (std::size_t i = 0; i < range.size(); ++i) range[i].add(t[i], a[i]);
      }
      for (std::size_t i = 0; i < m.size(); ++i) m[i] = m[i].defined() ? at::maximum(m[i], range[i].bound()) : range[i].bound();
    }
    for (std::size_t i = 0; i < m.size(); ++i) {
      if (g.tensors[i] == "output" && x.count("bias")) {  // the bias alone: every other leaf zero
        ops::TorchLeaves b;
        for (const auto& [name, t] : x) b.emplace(name, name == "bias" ? t : at::zeros_like(t));
        m[i] = m[i] + ops::torch_forward(params, b).detach().abs();
      }
      out.emplace(g.tensors[i], m[i]);
    }
  }
  return out;
}

}  // namespace validate::generate::detail
