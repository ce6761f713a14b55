// A bfloat16/float16 backward pass of conv2d or conv_transpose2d that keeps the running sum of
// grad_input or grad_weight in the narrow type is named narrow_accumulation, with the tensor, the
// format and the order; float32 sums in another order, dL/dy rounded alone and correct stacks are
// not. The gradients and the planted stacks are computed here from the definitions (float64 loops,
// rounding from frexp), independently of the harness's element path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "diagnosis_fixture.hpp"

namespace {

using i64 = std::int64_t;

// Nearest value with `bits` significant bits, ties to even, on the fixed grid below the smallest
// normal (quantum 2^qmin): bfloat16 8 bits, 2^-133; float16 11 bits, 2^-24.
struct Format {
  const char* name;
  DType dtype;
  int bits, qmin;
  double round(double v) const {
    if (v == 0 || !std::isfinite(v)) return v;
    int e;
    std::frexp(v, &e);
    const double q = std::ldexp(1.0, std::max(e - bits, qmin));
    return std::nearbyint(v / q) * q;
  }
};
const Format kBf16{"bfloat16", DType::bfloat16, 8, -133};
const Format kF16{"float16", DType::float16, 11, -24};

// A convolution-like case (conv2d, or conv_transpose2d with output padding).
struct Geo {
  bool transposed;
  i64 N, C, H, W, O, KH, KW, SH, SW, PH, PW, DH, DW, G, OPH = 0, OPW = 0;
  i64 HO() const {
    return transposed ? (H - 1) * SH - 2 * PH + DH * (KH - 1) + OPH + 1 : (H + 2 * PH - DH * (KH - 1) - 1) / SH + 1;
  }
  i64 WO() const {
    return transposed ? (W - 1) * SW - 2 * PW + DW * (KW - 1) + OPW + 1 : (W + 2 * PW - DW * (KW - 1) - 1) / SW + 1;
  }
  Shape x() const { return {N, C, H, W}; }
  Shape w() const { return transposed ? Shape{C, O / G, KH, KW} : Shape{O, C / G, KH, KW}; }
  Shape y() const { return {N, O, HO(), WO()}; }
};

// conv2d: every axis of every tensor a different size, batch 3, stride, padding, dilation.
const Geo kConv{false, 3, 5, 11, 13, 4, 3, 2, 1, 2, 1, 0, 2, 1, 1};
// conv2d with 2 groups, batch 2.
const Geo kConvGroups{false, 2, 10, 9, 11, 4, 3, 2, 2, 1, 1, 0, 1, 2, 2};
// conv_transpose2d with 2 groups, output padding, batch 2.
const Geo kTranspose{true, 2, 4, 5, 8, 6, 2, 5, 2, 1, 1, 2, 1, 1, 2, 1, 0};

// The products of one gradient element, grouped: one group for a single running sum, one group per
// kernel tap for col2im (each tap's GEMM over the output channels, then the taps added), one per
// batch element for per_sample (each sample's GEMM, then the samples added).
using Terms = std::vector<std::vector<double>>;

struct Case {
  Geo g;
  Tensor x, w, y, t;
  std::vector<double> dy32;  // dL/dy as a float32 backward forms it

  double X(i64 n, i64 c, i64 h, i64 w_) const { return x.get(((n * g.C + c) * g.H + h) * g.W + w_); }
  double Wt(i64 a, i64 b, i64 u, i64 v) const { return w.get(((a * g.w()[1] + b) * g.KH + u) * g.KW + v); }
  double Dy(const std::vector<double>& d, i64 n, i64 o, i64 oh, i64 ow) const {
    return d[static_cast<std::size_t>(((n * g.O + o) * g.HO() + oh) * g.WO() + ow)];
  }

  // The terms of grad_input (tensor "grad_input") or grad_weight at canonical index i, in `order`.
  Terms terms(const std::string& tensor, const std::string& order, i64 i, const std::vector<double>& d) const {
    Terms out;
    const i64 HO = g.HO(), WO = g.WO(), Og = g.O / g.G, Cg = g.C / g.G;
    if (tensor == "grad_input") {
      const i64 iw = i % g.W, ih = i / g.W % g.H, c = i / (g.W * g.H) % g.C, n = i / (g.W * g.H * g.C);
      const i64 o0 = c / Cg * Og;
      // The output position kernel tap (u, v) of input (ih, iw) meets, or false.
      auto tap = [&](i64 u, i64 v, i64& oh, i64& ow) {
        if (g.transposed) {
          oh = ih * g.SH - g.PH + u * g.DH, ow = iw * g.SW - g.PW + v * g.DW;
          return oh >= 0 && oh < HO && ow >= 0 && ow < WO;
        }
        const i64 th = ih + g.PH - u * g.DH, tw = iw + g.PW - v * g.DW;
        if (th < 0 || tw < 0 || th % g.SH || tw % g.SW) return false;
        oh = th / g.SH, ow = tw / g.SW;
        return oh < HO && ow < WO;
      };
      auto product = [&](i64 o, i64 oh, i64 ow, i64 u, i64 v) {
        return Dy(d, n, o, oh, ow) * (g.transposed ? Wt(c, o - o0, u, v) : Wt(o, c - c / Cg * Cg, u, v));
      };
      if (order == "col2im" || order == "col2im_f32") {
        for (i64 u = 0; u < g.KH; ++u)
          for (i64 v = 0; v < g.KW; ++v) {
            i64 oh, ow;
            if (!tap(u, v, oh, ow)) continue;
            out.emplace_back();
            for (i64 o = o0; o < o0 + Og; ++o) out.back().push_back(product(o, oh, ow, u, v));
          }
        return out;
      }
      out.emplace_back();
      auto add = [&](i64 o, i64 u, i64 v) {
        i64 oh, ow;
        if (tap(u, v, oh, ow)) out.back().push_back(product(o, oh, ow, u, v));
      };
      if (order == "o,kh,kw") {
        for (i64 o = o0; o < o0 + Og; ++o)
          for (i64 u = 0; u < g.KH; ++u)
            for (i64 v = 0; v < g.KW; ++v) add(o, u, v);
      } else if (order == "kh,kw,o") {
        for (i64 u = 0; u < g.KH; ++u)
          for (i64 v = 0; v < g.KW; ++v)
            for (i64 o = o0; o < o0 + Og; ++o) add(o, u, v);
      } else {  // "reversed": every loop descending, an order the diagnosis does not try
        for (i64 o = o0 + Og; o-- > o0;)
          for (i64 u = g.KH; u-- > 0;)
            for (i64 v = g.KW; v-- > 0;) add(o, u, v);
      }
      return out;
    }
    // grad_weight [O, C/G, KH, KW] (conv2d) or [C, O/G, KH, KW] (conv_transpose2d).
    const Shape ws = g.w();
    const i64 v = i % g.KW, u = i / g.KW % g.KH, b = i / (g.KW * g.KH) % ws[1], a = i / (g.KW * g.KH * ws[1]);
    const i64 o = g.transposed ? a / Cg * Og + b : a, c = g.transposed ? a : a / Og * Cg + b;
    // The sum runs over dL/dy's (n, oh, ow) for conv2d, over the input's (n, ih, iw) for
    // conv_transpose2d: (n, p, q) below, p and q over the plane P x Q.
    const i64 P = g.transposed ? g.H : HO, Q = g.transposed ? g.W : WO;
    out.emplace_back();
    auto add = [&](i64 n, i64 p, i64 q) {
      const i64 r = p * g.SH - g.PH + u * g.DH, s = q * g.SW - g.PW + v * g.DW;  // the other tensor's row, column
      if (g.transposed) {
        if (r >= 0 && r < HO && s >= 0 && s < WO) out.back().push_back(X(n, c, p, q) * Dy(d, n, o, r, s));
      } else if (r >= 0 && r < g.H && s >= 0 && s < g.W) {
        out.back().push_back(Dy(d, n, o, p, q) * X(n, c, r, s));
      }
    };
    if (order == "per_sample" || order == "per_sample_f32") {  // a group per batch element, added in order
      out.pop_back();
      for (i64 n = 0; n < g.N; ++n) {
        out.emplace_back();
        for (i64 p = 0; p < P; ++p)
          for (i64 q = 0; q < Q; ++q) add(n, p, q);
      }
    } else if (order == "n,oh,ow" || order == "n,h,w") {
      for (i64 n = 0; n < g.N; ++n)
        for (i64 p = 0; p < P; ++p)
          for (i64 q = 0; q < Q; ++q) add(n, p, q);
    } else if (order == "oh,ow,n" || order == "h,w,n") {
      for (i64 p = 0; p < P; ++p)
        for (i64 q = 0; q < Q; ++q)
          for (i64 n = 0; n < g.N; ++n) add(n, p, q);
    } else {  // "reversed"
      for (i64 n = g.N; n-- > 0;)
        for (i64 p = P; p-- > 0;)
          for (i64 q = Q; q-- > 0;) add(n, p, q);
    }
    return out;
  }
};

// Random values of the case's format (the reference set stores them so), seeded.
Tensor random_in(const Shape& s, unsigned seed, const Format& f, double scale = 1.0) {
  Tensor t = random_tensor(s, seed);
  for (i64 i = 0; i < t.numel(); ++i) t.set(i, f.round(scale * t.get(i)));
  return t;
}

Case make_case(const Geo& g, const Format& f, unsigned seed) {
  Case k{g, random_in(g.x(), seed, f), random_in(g.w(), seed + 1, f), random_in(g.y(), seed + 2, f),
         Tensor(DType::float32, g.y()), {}};
  // The target far enough from the output that dL/dy = 2 (y - t) / N is of order 1 (far from
  // float16's subnormals), stored in the format; dL/dy formed in float32, as a float32 backward does.
  const Tensor off = random_in(g.y(), seed + 3, f, 0.25 * static_cast<double>(k.y.numel()));
  const float scale = 2.0f / static_cast<float>(k.y.numel());
  for (i64 i = 0; i < k.y.numel(); ++i) {
    k.t.set(i, f.round(k.y.get(i) - off.get(i)));
    k.dy32.push_back(static_cast<double>((static_cast<float>(k.y.get(i)) - static_cast<float>(k.t.get(i))) * scale));
  }
  return k;
}

// How a stack forms one element from its terms: `add` is its running sum's add; `group_add`, when
// given, the add within a group (a GEMM's own running sum), `add` then only adding the groups.
double sum(const Terms& terms, const std::function<double(double, double)>& add,
           const std::function<double(double, double)>& group_add = nullptr) {
  double s = 0;
  for (const auto& group : terms) {
    double part = 0;
    for (double p : group) part = (group_add ? group_add : add)(part, p);
    s = terms.size() == 1 ? part : add(s, part);
  }
  return s;
}

// A float32 add whose result is stored in the narrow format; a float32 add.
std::function<double(double, double)> narrow_add(const Format& f) {
  return [f](double s, double p) { return f.round(static_cast<float>(s + p)); };
}
double float32_add(double s, double p) { return static_cast<float>(s + p); }

struct Stack {
  std::string order;  // an order ending in _f32: each group's own sum in float32
  bool dy_rounded;                            // dL/dy rounded to the case format first
  std::function<double(double, double)> add;  // the running sum's add
};

// The reference (float64 sums of the float32 dL/dy, rounded once to the format) and a stack's
// gradient, rounded to the format as stored.
Tensor gradient(const Case& k, const std::string& tensor, const Format& f, const Stack* stack) {
  const Shape s = tensor == "grad_input" ? k.g.x() : k.g.w();
  std::vector<double> d = k.dy32;
  if (stack && stack->dy_rounded)
    for (double& v : d) v = f.round(v);
  Tensor out(DType::float32, s);
  for (i64 i = 0; i < out.numel(); ++i) {
    const Terms terms = k.terms(tensor, stack ? stack->order : "o,kh,kw", i, d);
    if (!stack) {
      double e = 0;
      for (const auto& group : terms)
        for (double p : group) e += p;
      out.set(i, f.round(e));
    } else {
      const bool f32_gemm = stack->order.size() > 4 && stack->order.substr(stack->order.size() - 4) == "_f32";
      out.set(i, f.round(sum(terms, stack->add, f32_gemm ? float32_add : nullptr)));
    }
  }
  return out;
}
Tensor reference(const Case& k, const std::string& tensor, const Format& f) {
  // The float64 sum in any order (the terms' order only moves it by float64 rounding).
  return gradient(k, tensor, f, nullptr);
}


DiagnosisInput gradient_input(const Case& k, const Tensor& ref, const Tensor& run, const std::string& tensor,
                              const Format& f) {
  const Geo& g = k.g;
  auto in = input_for(ref, run, tensor == "grad_input" ? "NCHW" : (g.transposed ? "IOHW" : "OIHW"), tensor,
                      g.transposed ? "conv_transpose2d" : "conv2d", "grad");
  in.logical = f.dtype;
  in.inputs = {{"input", view_of(k.x)}, {"weight", view_of(k.w)}, {"output", view_of(k.y)}, {"target", view_of(k.t)}};
  in.input_shapes = {{"input", g.x()}, {"weight", g.w()}, {"output", g.y()}, {"target", g.y()}};
  in.conv.stride[0] = g.SH, in.conv.stride[1] = g.SW;
  in.conv.padding[0] = g.PH, in.conv.padding[1] = g.PW;
  in.conv.dilation[0] = g.DH, in.conv.dilation[1] = g.DW;
  in.conv.groups = g.G;
  in.conv.bias = false;
  return in;
}

struct Row {
  Geo g;
  const Format* f;
  std::string tensor, order;
  bool dy_rounded;
};

std::string label(const Row& r) {
  return std::string(r.g.transposed ? "conv_transpose2d " : "conv2d ") + r.tensor + " " + r.f->name + " " + r.order +
         (r.dy_rounded ? " (dL/dy rounded)" : " (dL/dy float32)");
}

}  // namespace

// The planted narrow accumulator is named with the tensor, its format and its order, and no other
// order or format is named with it.
TEST(DiagnosisConvGradient, NarrowAccumulationIsNamedWithTensorFormatAndOrder) {
  const std::vector<Row> rows = {
      {kConv, &kBf16, "grad_weight", "n,oh,ow", true},
      {kConv, &kF16, "grad_weight", "oh,ow,n", true},
      {kConvGroups, &kBf16, "grad_weight", "n,oh,ow", false},
      {kConv, &kBf16, "grad_input", "col2im", true},
      {kConvGroups, &kF16, "grad_input", "col2im", true},
      {kConv, &kBf16, "grad_input", "o,kh,kw", true},
      {kConvGroups, &kF16, "grad_input", "kh,kw,o", false},
      {kTranspose, &kBf16, "grad_weight", "n,h,w", true},
      {kTranspose, &kF16, "grad_weight", "h,w,n", true},
      {kTranspose, &kBf16, "grad_input", "o,kh,kw", true},
      {kTranspose, &kF16, "grad_input", "kh,kw,o", true},
      {kConv, &kBf16, "grad_weight", "per_sample", true},
      {kConvGroups, &kF16, "grad_weight", "per_sample", false},
      {kTranspose, &kBf16, "grad_weight", "per_sample", true},
      {kConv, &kBf16, "grad_weight", "per_sample_f32", true},
      {kTranspose, &kF16, "grad_weight", "per_sample_f32", false},
      {kConv, &kBf16, "grad_input", "col2im_f32", true},
      {kConvGroups, &kF16, "grad_input", "col2im_f32", false},
  };
  unsigned seed = 100;
  for (const Row& r : rows) {
    SCOPED_TRACE(label(r));
    const Case k = make_case(r.g, *r.f, seed += 10);
    const Tensor ref = reference(k, r.tensor, *r.f);
    const Stack stack{r.order, r.dy_rounded, narrow_add(*r.f)};
    const Tensor run = gradient(k, r.tensor, *r.f, &stack);
    const auto dx = diagnose(gradient_input(k, ref, run, r.tensor, *r.f));
    ASSERT_NE(dx.named(), nullptr) << dx.summary;
    EXPECT_EQ(dx.named()->code, "narrow_accumulation") << dx.summary;
    EXPECT_EQ(dx.named()->tensor, r.tensor);
    for (const auto& m : dx.matches) {
      EXPECT_EQ(m.code, "narrow_accumulation") << dx.summary;
      EXPECT_EQ(m.params["format"], r.f->name) << dx.summary;
      EXPECT_EQ(m.params["order"], r.order) << dx.summary;
      EXPECT_EQ(m.params["dy"], r.dy_rounded ? "rounded to the case dtype" : "float32") << dx.summary;
      EXPECT_LE(m.max_abs * 4, m.params["clean_residual"].get<double>()) << dx.summary;
    }
    EXPECT_NE(dx.summary.find(std::string("running sum rounded to ") + r.f->name), std::string::npos) << dx.summary;
  }
}

// float32 running sums in an order the diagnosis does not try (both dL/dy routes), and a stack
// that only rounds dL/dy to the case format before float32 sums: never a narrow accumulator. A
// correct stack (the reference's own values) neither.
TEST(DiagnosisConvGradient, Float32SumsAndRoundedDyAreNotNarrowAccumulation) {
  unsigned seed = 300;
  for (const Geo& g : {kConv, kConvGroups, kTranspose})
    for (const Format* f : {&kBf16, &kF16})
      for (const std::string tensor : {"grad_input", "grad_weight"}) {
        const Case k = make_case(g, *f, seed += 10);
        const Tensor ref = reference(k, tensor, *f);
        const std::string canonical = tensor == "grad_input" ? "o,kh,kw" : (g.transposed ? "n,h,w" : "n,oh,ow");
        const Stack stacks[] = {{"reversed", false, float32_add},
                                {"reversed", true, float32_add},
                                {canonical, true, float32_add}};
        for (const Stack& stack : stacks) {
          SCOPED_TRACE(std::string(g.transposed ? "conv_transpose2d " : "conv2d ") + tensor + " " + f->name + " " +
                       stack.order + (stack.dy_rounded ? " dL/dy rounded" : ""));
          const Tensor run = gradient(k, tensor, *f, &stack);
          const auto dx = diagnose(gradient_input(k, ref, run, tensor, *f));
          EXPECT_FALSE(names_code(dx, "narrow_accumulation")) << dx.summary;
          // The accumulators were tried (and turned down), on a run that differs from the reference.
          EXPECT_NE(std::find(dx.families.begin(), dx.families.end(), "numeric"), dx.families.end());
          if (stack.dy_rounded) {
            EXPECT_GT(dx.baseline_max_abs, 0);
          }
        }
        SCOPED_TRACE("correct");
        const auto dx = diagnose(gradient_input(k, ref, ref, tensor, *f));
        EXPECT_FALSE(names_code(dx, "narrow_accumulation")) << dx.summary;
      }
}
