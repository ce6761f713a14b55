// Shared helpers of the diagnosis tests: random and flipped tensors, a DiagnosisInput builder, a
// float64 conv2d from the definition with plantable misreads, and a narrow-accumulator conv2d.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "../compare/fixture.hpp"
#include "narrow_loss.hpp"
#include "validate/diagnosis/diagnosis.hpp"
#include "validate/diagnosis/diagnosis_loss_check.hpp"
#include "validate/compare/diagnosis_op.hpp"
#include "validate/ops/op.hpp"
#include "validate/ops/registry.hpp"

using namespace validate;
using namespace validate::compare;
using validate::testing::permuted_bytes;

namespace {

inline Tensor random_tensor(const Shape& s, unsigned seed) {
  Tensor t(DType::float32, s);
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, d(gen));
  return t;
}

// Reverses the listed axes of a C-order tensor (a spatial flip of the data).
inline Tensor flipped(const Tensor& t, std::vector<bool> flip) {
  Tensor out(t.dtype(), t.shape());
  const Shape& s = t.shape();
  std::vector<std::int64_t> idx(s.size(), 0);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    std::int64_t off = 0;
    for (std::size_t a = 0; a < s.size(); ++a)
      off = off * s[a] + (flip[a] ? s[a] - 1 - idx[a] : idx[a]);
    out.set(off, t.get(i));
    for (std::size_t a = s.size(); a-- > 0;) {
      if (++idx[a] < s[a]) break;
      idx[a] = 0;
    }
  }
  return out;
}

inline DiagnosisInput input_for(const Tensor& ref, const Tensor& run, const std::string& axes,
                         const std::string& tensor, const std::string& op = "conv2d",
                         const std::string& role = "grad") {
  DiagnosisInput in;
  in.ref = view_of(ref);
  in.run = view_of(run);
  in.shape = ref.shape();
  in.run_shape = run.shape();
  in.axes = axes;
  in.tensor = tensor;
  in.op = ops::find(op)->id();  // names read as a reference's metadata would be
  in.role = ops::role_from_name(role);
  in.rtol = 5e-4;
  double mx = 0;
  for (std::int64_t i = 0; i < ref.numel(); ++i) mx = std::max(mx, std::fabs(ref.get(i)));
  in.floor = 0.01 * mx;
  return in;
}

}  // namespace

namespace {

// conv2d in float64 from the definition (PyTorch's cross-correlation), with the input and weight
// read through index functions so a test can plant a misread. Shapes: x [N,C,H,W], w [O,C/G,KH,KW].
struct Conv {
  std::int64_t N, C, H, W, O, KH, KW, SH, SW, PH, PW, DH, DW, G;
  std::int64_t HO() const { return (H + 2 * PH - DH * (KH - 1) - 1) / SH + 1; }
  std::int64_t WO() const { return (W + 2 * PW - DW * (KW - 1) - 1) / SW + 1; }
  template <class X, class Wt>
  Tensor run(X x, Wt w, const Tensor* b) const {
    Tensor y(DType::float32, {N, O, HO(), WO()});
    const std::int64_t CG = C / G, OG = O / G;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t o = 0; o < O; ++o)
        for (std::int64_t oh = 0; oh < HO(); ++oh)
          for (std::int64_t ow = 0; ow < WO(); ++ow) {
            double s = b ? b->get(o) : 0.0;
            for (std::int64_t c = 0; c < CG; ++c)
              for (std::int64_t u = 0; u < KH; ++u)
                for (std::int64_t v = 0; v < KW; ++v) {
                  const std::int64_t ih = oh * SH - PH + u * DH, iw = ow * SW - PW + v * DW;
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                  s += x(n, (o / OG) * CG + c, ih, iw) * w(o, c, u, v);
                }
            y.set(((n * O + o) * HO() + oh) * WO() + ow, s);
          }
    return y;
  }
};

// Every axis a different size, batch 2, stride, padding, dilation, groups (as in cases/smoke.json).
const Conv kOdd{2, 6, 7, 9, 4, 3, 2, 2, 1, 1, 0, 1, 2, 2};

inline DiagnosisInput conv_input(const Conv& g, const Tensor& ref, const Tensor& run, const Tensor& x,
                          const Tensor& w, const Tensor* b) {
  auto in = input_for(ref, run, "NCHW", "output", "conv2d", "output");
  in.inputs = {{"input", view_of(x)}, {"weight", view_of(w)}};
  in.input_shapes = {{"input", x.shape()}, {"weight", w.shape()}};
  if (b) {
    in.inputs["bias"] = view_of(*b);
    in.input_shapes["bias"] = b->shape();
  }
  in.conv.stride[0] = g.SH;
  in.conv.stride[1] = g.SW;
  in.conv.padding[0] = g.PH;
  in.conv.padding[1] = g.PW;
  in.conv.dilation[0] = g.DH;
  in.conv.dilation[1] = g.DW;
  in.conv.groups = g.G;
  in.conv.bias = b != nullptr;
  // The op's parameters, as compare hands them over (add_reference_tensors): the whole-output
  // recomputes go through the op's own reference with them.
  ops::ConvParams p;
  p.n = g.N, p.c = g.C, p.h = g.H, p.w = g.W, p.o = g.O, p.kh = g.KH, p.kw = g.KW;
  p.stride = {g.SH, g.SW}, p.padding = {g.PH, g.PW}, p.dilation = {g.DH, g.DW};
  p.groups = g.G;
  p.bias = b != nullptr;
  in.params = p;
  return in;
}

}  // namespace

namespace {

using validate::testing::round_bits;  // narrow_loss.hpp

// conv2d with the running sum (started at the bias) rounded after every add, in the order
// (c, kh, kw) or (kh, kw, c), or `reversed` (c, kh, kw all descending).
template <class R>
inline Tensor conv_narrow(const Conv& g, const Tensor& x, const Tensor& w, const Tensor* b, R round,
                   bool channels_inner, bool reversed = false) {
  Tensor y(DType::float32, {g.N, g.O, g.HO(), g.WO()});
  const std::int64_t CG = g.C / g.G, OG = g.O / g.G;
  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t o = 0; o < g.O; ++o)
      for (std::int64_t oh = 0; oh < g.HO(); ++oh)
        for (std::int64_t ow = 0; ow < g.WO(); ++ow) {
          double s = round(b ? b->get(o) : 0.0);
          auto add = [&](std::int64_t c, std::int64_t u, std::int64_t v) {
            const std::int64_t ih = oh * g.SH - g.PH + u * g.DH, iw = ow * g.SW - g.PW + v * g.DW;
            if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) return;
            s = round(s + static_cast<double>(x.get(((n * g.C + (o / OG) * CG + c) * g.H + ih) * g.W + iw)) *
                              w.get(((o * CG + c) * g.KH + u) * g.KW + v));
          };
          if (reversed) {  // neither order the diagnosis tries
            for (std::int64_t c = CG; c-- > 0;)
              for (std::int64_t u = g.KH; u-- > 0;)
                for (std::int64_t v = g.KW; v-- > 0;) add(c, u, v);
          } else if (channels_inner) {
            for (std::int64_t u = 0; u < g.KH; ++u)
              for (std::int64_t v = 0; v < g.KW; ++v)
                for (std::int64_t c = 0; c < CG; ++c) add(c, u, v);
          } else {
            for (std::int64_t c = 0; c < CG; ++c)
              for (std::int64_t u = 0; u < g.KH; ++u)
                for (std::int64_t v = 0; v < g.KW; ++v) add(c, u, v);
          }
          y.set(((n * g.O + o) * g.HO() + oh) * g.WO() + ow, s);
        }
  return y;
}

inline bool names_code(const Diagnosis& dx, const std::string& code) {
  for (const auto& h : dx.matches)
    if (h.code == code) return true;
  return false;
}

}  // namespace
