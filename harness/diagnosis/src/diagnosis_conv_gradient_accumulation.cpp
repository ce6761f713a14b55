// Gradient side, conv2d and conv_transpose2d: the backward-data and backward-filter sums kept in a
// narrow type. As for matmul's grad_A/grad_B (diagnosis_gradient_accumulation.cpp), dL/dy is
// 2 (y - t) / N from the reference's stored output and target, rounded to the case dtype or kept in
// float32, and a narrow accumulator is named only when it reproduces the run AND leaves at most
// 1/kNarrowFactor of the clean float64 recompute's residual (try_narrow_accumulation).
//
// Each gradient is a convolution itself, so the ops' own per-element sums recompute it
// (OpDef::output_element) in the orders those sums follow (OpDef::sum_orders: canonical and
// channels_inner):
//  - conv2d's grad_input is a conv_transpose2d of dL/dy with the same weight bytes (the conv2d
//    weight [O, C/g, kh, kw] is a transposed conv's [in, out/g, kh, kw]); conv_transpose2d's
//    grad_input is a conv2d of dL/dy with its weight. Orders: (o, kh, kw), a direct loop nest,
//    and (kh, kw, o), the K of an implicit GEMM on channels-last data.
//  - grad_weight[o, c, u, v] = sum over n, oh, ow of dy[n, o, oh, ow] x[n, c, oh*s - p + u*d, ...]
//    is a conv2d whose batch is x's channel axis, whose channels are the batch, whose kernel is
//    dL/dy's (oh, ow) plane, with stride and dilation exchanged (conv_transpose2d's: the roles of
//    x and dL/dy exchanged). Orders: (n, oh, ow), the K of the im2col GEMM and of a direct loop,
//    and (oh, ow, n), the batch innermost.
// conv2d's grad_input has one more order the op's sum does not follow: im2col + GEMM + col2im, the
// way Caffe-style ports and LibTorch's CPU slow_conv2d compute it — a GEMM over the output channels
// per kernel tap, its result added into grad_input tap by tap in (kh, kw) order, each add in the
// buffer's type. A narrow type rounds twice there (the GEMM's running sum, then the col2im adds),
// so it is recomputed here.
//
// Cost: sampled positions (in.recompute_sample), K multiply-adds each (grad_weight's K is
// N*Hout*Wout), per order, accumulator and dL/dy route; the float32 route only where the rounded
// one names nothing; only on a failing bfloat16 or float16 gradient. The clean recompute goes
// first, so a hypothesis stops at the first position whose residual rules it out: on a long
// reduction a wrong order or format stays inside the element test's tolerance and would otherwise
// run every position.
#include <array>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "diagnosis_internal.hpp"
#include "diagnosis_operand.hpp"
#include "validate/ops/registry.hpp"

namespace validate::compare::detail {

namespace {

using i64 = std::int64_t;

std::array<i64, 4> contiguous(const Shape& s) { return {s[1] * s[2] * s[3], s[2] * s[3], s[3], 1}; }

// A canonical tensor read through strides (per canonical axis of the operand the sum sees).
ops::ElementOperand strided(const ArrayView& v, const std::array<i64, 4>& stride) {
  ops::ElementOperand e{};
  e.data = v.data;
  e.storage = v.storage;
  e.stride = stride;
  return e;
}

// An order of one gradient's sum: how reports name it, in words, the element path's order, and the
// value at a position of the gradient (canonical index) summed as the options say.
struct GradientOrder {
  const char* name;
  const char* words;
  ops::SumOrder order;
  ElementValue value;
};

// The running sum of the options: float64, or each add a float32 add stored in the narrow type
// (ElementOptions::float32_adds, as the op's element path does it).
double add(double s, double t, const ops::ElementOptions& opt) {
  switch (opt.accumulation) {
    case ops::Accumulation::bfloat16: return round_as(static_cast<float>(s + t), Rounding::bfloat16);
    case ops::Accumulation::float16: return round_as(static_cast<float>(s + t), Rounding::float16);
    case ops::Accumulation::float32: return static_cast<float>(s + t);
    case ops::Accumulation::float64: break;
  }
  return s + t;
}

// The options of a two-level order's inner GEMM: the gradient's own, or with `float32` its running
// sum in float32 (a GEMM on narrow data with a float32 compute type), only the outer adds narrow.
ops::ElementOptions gemm_options(const ops::ElementOptions& opt, bool float32) {
  ops::ElementOptions gemm = opt;
  if (float32) gemm.accumulation = ops::Accumulation::float32;
  return gemm;
}

// conv2d's grad_input by im2col + GEMM + col2im (see the top of the file): per tap (kh, kw) in
// order, the GEMM's sum over the group's output channels, added into the running sum.
// `gemm_float32`: each GEMM sums in float32 (a narrow-typed GEMM with a float32 compute type) and
// only the taps' adds are narrow.
ElementValue col2im_grad_input(const ops::ConvParams& p, const std::vector<float>& dy, const ArrayView& w,
                               bool gemm_float32) {
  return [&p, &dy, w, gemm_float32](i64 i, const ops::ElementOptions& opt) {
    const ops::ElementOptions gemm = gemm_options(opt, gemm_float32);
    const i64 Ho = p.hout(), Wo = p.wout(), og = p.o / p.groups, cg = p.c / p.groups;
    const i64 x = i % p.w, y = i / p.w % p.h, c = i / (p.w * p.h) % p.c, n = i / (p.w * p.h * p.c);
    const i64 o0 = c / cg * og, cl = c % cg;
    double s = 0;
    for (i64 u = 0; u < p.kh; ++u) {
      const i64 th = y + p.padding[0] - u * p.dilation[0];
      if (th < 0 || th % p.stride[0] || th / p.stride[0] >= Ho) continue;
      const i64 oh = th / p.stride[0];
      for (i64 v = 0; v < p.kw; ++v) {
        const i64 tw = x + p.padding[1] - v * p.dilation[1];
        if (tw < 0 || tw % p.stride[1] || tw / p.stride[1] >= Wo) continue;
        const i64 ow = tw / p.stride[1];
        double part = 0;
        for (i64 o = o0; o < o0 + og; ++o)
          part = add(part,
                     static_cast<double>(dy[static_cast<std::size_t>(((n * p.o + o) * Ho + oh) * Wo + ow)]) *
                         read_value(w, ((o * cg + cl) * p.kh + u) * p.kw + v),
                     gemm);
        s = add(s, part, opt);
      }
    }
    return s;
  };
}

// The shapes and geometry of the op, checked against the reference tensors; false when they do not
// describe the case.
struct Geometry {
  Shape xs, ws, ys;  // input, weight, output (NCHW, the op's weight order, NCHW)
  ops::ConvParams conv;
  ops::ConvTransposeParams transpose;
};

bool geometry(const DiagnosisInput& in, bool transposed, Geometry& g) {
  for (const char* n : {"input", "weight", "output", "target"})
    if (!in.inputs.count(n) || !in.input_shapes.count(n)) return false;
  g.ys = in.input_shapes.at("output");
  if (g.ys.size() != 4 || in.input_shapes.at("target") != g.ys) return false;
  if (!transposed) {
    if (!conv_like_params(in, g.conv)) return false;
    g.xs = in.input_shapes.at("input"), g.ws = in.input_shapes.at("weight");
    ops::ConvParams& p = g.conv;
    p.o = g.ws[0];
    p.bias = false;
    return p.o % p.groups == 0 && p.c == g.ws[1] * p.groups && g.ys == Shape{p.n, p.o, p.hout(), p.wout()};
  }
  if (!conv_like_params(in, g.transpose)) return false;
  g.xs = in.input_shapes.at("input"), g.ws = in.input_shapes.at("weight");
  ops::ConvTransposeParams& p = g.transpose;
  p.o = g.ws[1] * p.groups;
  p.output_padding = {g.ys[2] - p.hout(), g.ys[3] - p.wout()};
  p.bias = false;
  return p.c == g.ws[0] && p.c % p.groups == 0 && g.ys[0] == p.n && g.ys[1] == p.o && p.output_padding[0] >= 0 &&
         p.output_padding[1] >= 0;
}

// grad_weight summed per batch element, then the batch's partials added into it one by one: a GEMM
// per sample (over dL/dy's rows and columns for conv2d, the input's for conv_transpose2d) with
// beta = 1 into the gradient's buffer, as Caffe-style ports loop over the batch. A narrow type
// rounds twice there, as in col2im. With one sample it is the (n, oh, ow) sum itself.
// `gemm_float32` as for col2im.
ElementValue per_sample_grad_weight(const Geometry& g, bool transposed, const std::vector<float>& dy,
                                    const ArrayView& x, const ConvGeometry& geo, bool gemm_float32) {
  return [&g, transposed, &dy, x, &geo, gemm_float32](i64 i, const ops::ElementOptions& opt) {
    const ops::ElementOptions gemm = gemm_options(opt, gemm_float32);
    const i64 N = g.xs[0], C = g.xs[1], H = g.xs[2], W = g.xs[3], O = g.ys[1], Ho = g.ys[2], Wo = g.ys[3];
    const i64 kh = g.ws[2], kw = g.ws[3], b_group = g.ws[1];
    const i64 og = O / geo.groups, cg = C / geo.groups;
    const i64 v = i % kw, u = i / kw % kh, bl = i / (kw * kh) % b_group, a = i / (kw * kh * b_group);
    // conv2d's weight [O, C/g, kh, kw]; conv_transpose2d's [C, O/g, kh, kw].
    const i64 o = transposed ? a / cg * og + bl : a, c = transposed ? a : a / og * cg + bl;
    const i64 P = transposed ? H : Ho, Q = transposed ? W : Wo;  // the plane each sample's sum runs over
    double s = 0;
    for (i64 n = 0; n < N; ++n) {
      double part = 0;
      for (i64 p = 0; p < P; ++p)
        for (i64 q = 0; q < Q; ++q) {
          // The other tensor's row and column at this tap.
          const i64 r = p * geo.stride[0] - geo.padding[0] + u * geo.dilation[0];
          const i64 t = q * geo.stride[1] - geo.padding[1] + v * geo.dilation[1];
          if (transposed ? (r < 0 || r >= Ho || t < 0 || t >= Wo) : (r < 0 || r >= H || t < 0 || t >= W)) continue;
          const i64 xi = transposed ? ((n * C + c) * H + p) * W + q : ((n * C + c) * H + r) * W + t;
          const i64 di = transposed ? ((n * O + o) * Ho + r) * Wo + t : ((n * O + o) * Ho + p) * Wo + q;
          part = add(part, static_cast<double>(dy[static_cast<std::size_t>(di)]) * read_value(x, xi), gemm);
        }
      s = add(s, part, opt);
    }
    return s;
  };
}

// A gradient written as a convolution: `R`'s op over two operands, the gradient's canonical
// position mapped to R's output position by `at`.
template <class At>
ElementValue as_convolution(const ElementRecompute& R, const ops::ElementOperands& operands, At at) {
  return [&R, &operands, at](i64 i, const ops::ElementOptions& opt) { return R.at(at(i), operands, opt); };
}

}  // namespace

void search_conv_gradient_accumulation(const DiagnosisInput& in, Search& s) {
  const bool transposed = in.op == ops::Op::conv_transpose2d;
  if ((in.op != ops::Op::conv2d && !transposed) || in.role != ops::Role::grad || in.run_shape != in.shape) return;
  const bool grad_input = in.tensor == "grad_input";
  if (!grad_input && in.tensor != "grad_weight") return;
  if (in.logical != DType::bfloat16 && in.logical != DType::float16) return;  // accumulators_to_try
  Geometry g;
  if (!geometry(in, transposed, g) || in.shape != (grad_input ? g.xs : g.ws)) return;
  const i64 N = g.xs[0], C = g.xs[1], H = g.xs[2], W = g.xs[3];
  const i64 Oy = g.ys[1], Hy = g.ys[2], Wy = g.ys[3];
  const ArrayView x = in.inputs.at("input"), w = in.inputs.at("weight");
  const auto& geo = in.conv;
  const i64 groups = geo.groups;

  // The convolution each gradient is (see the top of the file). dy's bytes are filled per route.
  std::vector<float> dy;
  std::optional<ElementRecompute> R;
  ops::ElementOperands operands;
  std::function<i64(i64)> at = [](i64 i) { return i; };
  const char *first = "", *first_words = "", *second = "", *second_words = "";
  auto set_operands = [&](const char* a, ops::ElementOperand ea, const char* b, ops::ElementOperand eb) {
    operands = R->fixed;
    operands[a] = ea;
    operands[b] = eb;
  };
  if (grad_input) {
    first = "o,kh,kw", first_words = "summed over the output channels, the kernel window innermost";
    second = "kh,kw,o", second_words = "summed over the kernel window with the output channels innermost, as an "
                                       "implicit GEMM on channels-last data runs";
    if (!transposed) {
      ops::ConvTransposeParams p;
      p.n = N, p.c = Oy, p.h = Hy, p.w = Wy, p.o = C, p.kh = g.ws[2], p.kw = g.ws[3], p.groups = groups;
      p.bias = false;
      for (int a = 0; a < 2; ++a)
        p.stride[a] = geo.stride[a], p.padding[a] = geo.padding[a], p.dilation[a] = geo.dilation[a];
      p.output_padding = {H - p.hout(), W - p.wout()};
      if (p.output_padding[0] < 0 || p.output_padding[1] < 0) return;
      R.emplace(ops::Op::conv_transpose2d, p);
    } else {
      ops::ConvParams p;
      p.n = N, p.c = Oy, p.h = Hy, p.w = Wy, p.o = C, p.kh = g.ws[2], p.kw = g.ws[3], p.groups = groups;
      p.bias = false;
      for (int a = 0; a < 2; ++a)
        p.stride[a] = geo.stride[a], p.padding[a] = geo.padding[a], p.dilation[a] = geo.dilation[a];
      if (p.hout() != H || p.wout() != W) return;
      R.emplace(ops::Op::conv2d, p);
    }
  } else {
    // grad_weight: a conv2d with batch and channels exchanged, stride and dilation exchanged, over
    // the input's (conv2d) or dL/dy's (conv_transpose2d) plane, with the other as its kernel.
    ops::ConvParams p;
    p.n = transposed ? Oy : C, p.c = N, p.h = transposed ? Hy : H, p.w = transposed ? Wy : W;
    p.o = transposed ? C : Oy, p.kh = transposed ? H : Hy, p.kw = transposed ? W : Wy, p.groups = 1;
    p.bias = false;
    for (int a = 0; a < 2; ++a)
      p.stride[a] = geo.dilation[a], p.padding[a] = geo.padding[a], p.dilation[a] = geo.stride[a];
    const i64 hk = p.hout(), wk = p.wout();
    if (hk < g.ws[2] || wk < g.ws[3]) return;
    R.emplace(ops::Op::conv2d, p);
    // The gradient's [A, B/g, kh, kw] (conv2d: A = O, B = C; conv_transpose2d: A = C, B = O) at
    // the pseudo-convolution's output [batch, channel, hk, wk].
    const i64 kh = g.ws[2], kw = g.ws[3], a_all = g.ws[0], b_group = g.ws[1];
    const i64 a_group = (transposed ? C : Oy) / groups;
    at = [=](i64 i) {
      const i64 v = i % kw, u = i / kw % kh, bl = i / (kw * kh) % b_group, a = i / (kw * kh * b_group);
      const i64 b = a / a_group * b_group + bl;  // b's index over all its channels
      // conv2d: batch = c (= b), channel = o (= a); conv_transpose2d: batch = o (= b), channel = c (= a).
      return ((b * a_all + a) * hk + u) * wk + v;
    };
    first = transposed ? "n,h,w" : "n,oh,ow";
    first_words = transposed ? "summed over the batch, then the input rows and columns, as the GEMM's K runs"
                             : "summed over the batch, then the output rows and columns, as the im2col GEMM's K runs";
    second = transposed ? "h,w,n" : "oh,ow,n";
    second_words = "summed over the rows and columns with the batch innermost";
  }
  s.family("numeric");
  const i64 numel = shape_numel(in.shape);
  const ElementTest t = recompute_test(in);
  const auto positions = sample_positions(numel, in.recompute_sample);
  const ops::ConvParams& cp = g.conv;
  for (bool rounded : {true, false}) {  // the kept route only where the rounded one names nothing
    dy = mse_dy(in.inputs.at("output"), in.inputs.at("target"), in.logical, rounded);
    const ArrayView d{reinterpret_cast<const std::byte*>(dy.data()), DType::float32, static_cast<i64>(dy.size())};
    const std::array<i64, 4> dy_c = contiguous(g.ys), x_c = contiguous(g.xs);
    // Batch and channel axes exchanged: the pseudo-convolution of grad_weight reads [C, N, ...].
    const std::array<i64, 4> dy_t{dy_c[1], dy_c[0], dy_c[2], dy_c[3]}, x_t{x_c[1], x_c[0], x_c[2], x_c[3]};
    if (grad_input)
      set_operands("input", strided(d, dy_c), "weight", strided(w, contiguous(g.ws)));
    else if (!transposed)
      set_operands("input", strided(x, x_t), "weight", strided(d, dy_t));
    else
      set_operands("input", strided(d, dy_t), "weight", strided(x, x_t));
    std::vector<GradientOrder> orders{
        {first, first_words, ops::SumOrder::canonical, as_convolution(*R, operands, at)},
        {second, second_words, ops::SumOrder::channels_inner, as_convolution(*R, operands, at)}};
    // Each two-level order twice: the GEMM's running sum narrow too, or float32 with only the
    // adds into the gradient narrow (a GEMM on narrow data with a float32 compute type).
    if (!grad_input && N > 1) {
      orders.push_back({"per_sample",
                        "per batch element a GEMM over the plane, the batch's partials added into grad_weight one "
                        "by one",
                        ops::SumOrder::canonical, per_sample_grad_weight(g, transposed, dy, x, geo, false)});
      orders.push_back({"per_sample_f32",
                        "per batch element a GEMM over the plane summed in float32, the batch's partials added "
                        "into grad_weight one by one",
                        ops::SumOrder::canonical, per_sample_grad_weight(g, transposed, dy, x, geo, true)});
    }
    if (grad_input && !transposed) {
      orders.push_back({"col2im",
                        "im2col + GEMM + col2im: per kernel tap a GEMM over the output channels, the taps added "
                        "into grad_input in kh, kw order",
                        ops::SumOrder::canonical, col2im_grad_input(cp, dy, w, false)});
      orders.push_back({"col2im_f32",
                        "im2col + GEMM + col2im: per kernel tap a GEMM over the output channels summed in float32, "
                        "the taps added into grad_input in kh, kw order",
                        ops::SumOrder::canonical, col2im_grad_input(cp, dy, w, true)});
    }
    double clean = -1;  // residual of the clean recompute, computed before the first hypothesis
    bool named = false;
    for (Rounding acc : accumulators_to_try(in.logical))
      for (const GradientOrder& o : orders) {
        Hypothesis h = narrow_accumulation_hypothesis(acc, in.tensor, o.name, o.words);
        h.params["dy"] = rounded ? "rounded to the case dtype" : "float32";
        named |= try_narrow_accumulation(in, s, t, positions, numel, std::move(h), o.value,
                                         recompute_options(1.0, acc, o.order), clean, true);
      }
    if (named) return;
  }
}

}  // namespace validate::compare::detail
