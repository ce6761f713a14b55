// Each usual layout mistake, made on purpose, must be named; random differences must not be.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "fixture.hpp"
#include "narrow_loss.hpp"
#include "validate/compare/diagnosis.hpp"
#include "validate/compare/diagnosis_loss_check.hpp"
#include "validate/compare/diagnosis_op.hpp"
#include "validate/ops/op.hpp"
#include "validate/ops/registry.hpp"

using namespace validate;
using namespace validate::compare;
using validate::testing::permuted_bytes;

namespace {

Tensor random_tensor(const Shape& s, unsigned seed) {
  Tensor t(DType::float32, s);
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, d(gen));
  return t;
}

// Reverses the listed axes of a C-order tensor (a spatial flip of the data).
Tensor flipped(const Tensor& t, std::vector<bool> flip) {
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

DiagnosisInput input_for(const Tensor& ref, const Tensor& run, const std::string& axes,
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

TEST(Diagnosis, HeightWidthSwapOnASquareTensor) {
  Tensor ref = random_tensor({2, 3, 5, 5}, 1);
  Tensor run = permuted_bytes(ref, {0, 1, 3, 2});
  auto dx = diagnose(input_for(ref, run, "NCHW", "grad_input"));
  ASSERT_FALSE(dx.matches.empty()) << dx.tried;
  EXPECT_EQ(dx.matches[0].spec, "NCWH");
  EXPECT_TRUE(dx.matches[0].confirmed_all);
  EXPECT_NE(dx.summary.find("with H and W swapped"), std::string::npos) << dx.summary;
  EXPECT_NE(dx.summary.find("square"), std::string::npos) << dx.summary;
}

TEST(Diagnosis, FortranOrderReadAsC) {
  Tensor ref = random_tensor({2, 3, 4, 5}, 2);
  Tensor run = permuted_bytes(ref, {3, 2, 1, 0});  // column-major bytes of the canonical tensor
  auto dx = diagnose(input_for(ref, run, "NCHW", "output", "conv2d", "output"));
  ASSERT_FALSE(dx.matches.empty());
  EXPECT_EQ(dx.matches[0].spec, "NCHW:F");
  EXPECT_NE(dx.summary.find("Fortran (column-major)"), std::string::npos) << dx.summary;
}

// Batch 1, as in every case of the default sweep: the Fortran bytes are also those of a C<->W swap,
// and the Fortran reading is what must be named.
TEST(Diagnosis, FortranOrderWithBatchOne) {
  Tensor ref = random_tensor({1, 3, 4, 5}, 6);
  Tensor run = permuted_bytes(ref, {3, 2, 1, 0});
  auto dx = diagnose(input_for(ref, run, "NCHW", "output", "conv2d", "output"));
  ASSERT_FALSE(dx.matches.empty());
  EXPECT_EQ(dx.matches[0].spec, "NCHW:F");
  EXPECT_NE(dx.summary.find("Fortran (column-major)"), std::string::npos) << dx.summary;
  // The same bytes are a C<->W swap plus the N move, which the sentence says it cannot tell apart.
  ASSERT_TRUE(dx.matches[0].params.contains("same_bytes_as")) << dx.summary;
  EXPECT_NE(dx.summary.find("the same bytes are also"), std::string::npos) << dx.summary;
}

TEST(Diagnosis, FlippedFilterGradient) {
  Tensor ref = random_tensor({4, 3, 3, 3}, 3);
  Tensor run = flipped(ref, {false, false, true, true});
  auto dx = diagnose(input_for(ref, run, "OIHW", "grad_weight"));
  ASSERT_FALSE(dx.matches.empty());
  EXPECT_EQ(dx.matches[0].spec, "OIHW+flip=HW");
  EXPECT_NE(dx.summary.find("run grad_weight equals reference with H and W flipped"),
            std::string::npos)
      << dx.summary;
  EXPECT_NE(dx.summary.find("CUDNN_CONVOLUTION"), std::string::npos) << dx.summary;
}

TEST(Diagnosis, ChannelsLastWithFlip) {
  Tensor ref = random_tensor({1, 4, 6, 7}, 4);
  Tensor run = flipped(ref, {false, false, false, true});  // W flipped ...
  run = permuted_bytes(run, {0, 2, 3, 1});                 // ... and written NHWC
  auto dx = diagnose(input_for(ref, run, "NCHW", "grad_input"));
  ASSERT_FALSE(dx.matches.empty());
  EXPECT_EQ(dx.matches[0].spec, "NHWC+flip=W");
}

TEST(Diagnosis, TransposedMatrixOperand) {
  Tensor ref = random_tensor({6, 4}, 5);  // grad_B [K, N]
  Tensor run = permuted_bytes(ref, {1, 0});
  auto dx = diagnose(input_for(ref, run, "KN", "grad_B", "matmul"));
  ASSERT_FALSE(dx.matches.empty());
  EXPECT_EQ(dx.matches[0].spec, "NK");
  EXPECT_NE(dx.summary.find("K and N swapped"), std::string::npos) << dx.summary;
  EXPECT_NE(dx.summary.find("[K,N] matrix returned as [N,K]"), std::string::npos) << dx.summary;
}

TEST(Diagnosis, MatmulOutputWithBReadTransposed) {
  const std::int64_t M = 8, K = 6, N = 4;
  Tensor A = random_tensor({M, K}, 6), B = random_tensor({K, N}, 7);
  Tensor ref(DType::float32, {M, N}), run(DType::float32, {M, N});
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      double s = 0, t = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        s += A.get(m * K + k) * B.get(k * N + n);
        t += A.get(m * K + k) * B.get(n * K + k);  // B's bytes read as [N, K]
      }
      ref.set(m * N + n, s);
      run.set(m * N + n, t);
    }
  auto in = input_for(ref, run, "MN", "output", "matmul", "output");
  in.inputs = {{"A", view_of(A)}, {"B", view_of(B)}};
  in.input_shapes = {{"A", A.shape()}, {"B", B.shape()}};
  auto dx = diagnose(in);
  ASSERT_FALSE(dx.matches.empty()) << dx.summary;
  EXPECT_EQ(dx.matches[0].spec, "matmul:B=NK");
  EXPECT_NE(dx.summary.find("B read in NK layout"), std::string::npos) << dx.summary;
}

TEST(Diagnosis, ConvolutionInsteadOfCorrelation) {
  Tensor x = random_tensor({1, 2, 5, 5}, 8), w = random_tensor({3, 2, 3, 3}, 9),
         b = random_tensor({3}, 10);
  Tensor ref(DType::float32, {1, 3, 5, 5}), run(DType::float32, {1, 3, 5, 5});
  for (int o = 0; o < 3; ++o)
    for (int y = 0; y < 5; ++y)
      for (int xx = 0; xx < 5; ++xx) {
        double s = b.get(o), t = b.get(o);
        for (int c = 0; c < 2; ++c)
          for (int u = 0; u < 3; ++u)
            for (int v = 0; v < 3; ++v) {
              const int iy = y - 1 + u, ix = xx - 1 + v;
              if (iy < 0 || iy >= 5 || ix < 0 || ix >= 5) continue;
              const double xv = x.get((c * 5 + iy) * 5 + ix);
              s += xv * w.get(((o * 2 + c) * 3 + u) * 3 + v);
              t += xv * w.get(((o * 2 + c) * 3 + (2 - u)) * 3 + (2 - v));
            }
        ref.set((o * 5 + y) * 5 + xx, s);
        run.set((o * 5 + y) * 5 + xx, t);
      }
  auto in = input_for(ref, run, "NCHW", "output", "conv2d", "output");
  in.inputs = {{"input", view_of(x)}, {"weight", view_of(w)}, {"bias", view_of(b)}};
  in.input_shapes = {{"input", x.shape()}, {"weight", w.shape()}, {"bias", b.shape()}};
  in.conv.padding[0] = in.conv.padding[1] = 1;
  in.conv.bias = true;
  auto dx = diagnose(in);
  ASSERT_FALSE(dx.matches.empty()) << dx.summary;
  EXPECT_EQ(dx.matches[0].code, "flipped");
  EXPECT_EQ(dx.matches[0].tensor, "weight");
  EXPECT_EQ(dx.matches[0].side, "input");
  EXPECT_EQ(dx.matches[0].spec, "OIHW+flip=HW");
  EXPECT_NE(dx.summary.find("cross-correlation"), std::string::npos) << dx.summary;
}

TEST(Diagnosis, TrueTransposeWithAPermutedShape) {
  Tensor ref = random_tensor({1, 2, 3, 5}, 11);
  Tensor run = permuted_bytes(ref, {0, 1, 3, 2});
  run.reshape({1, 2, 5, 3});  // an honest transpose: the file says [N, C, W, H]
  auto dx = diagnose(input_for(ref, run, "NCHW", "grad_input"));
  ASSERT_EQ(dx.matches.size(), 1u);
  EXPECT_EQ(dx.matches[0].spec, "NCWH");
}

TEST(Diagnosis, SampledThenConfirmedOnLargeTensors) {
  Tensor ref = random_tensor({4, 16, 64, 64}, 12);
  Tensor run = flipped(ref, {false, false, false, true});
  auto in = input_for(ref, run, "NCHW", "grad_input");
  auto dx = diagnose(in);
  ASSERT_FALSE(dx.matches.empty());
  EXPECT_EQ(dx.matches[0].spec, "NCHW+flip=W");
  EXPECT_TRUE(dx.matches[0].confirmed_all);
  EXPECT_EQ(dx.matches[0].checked, ref.numel());
}

TEST(Diagnosis, UnrelatedDataIsNotExplained) {
  Tensor ref = random_tensor({2, 3, 4, 4}, 13), run = random_tensor({2, 3, 4, 4}, 14);
  auto dx = diagnose(input_for(ref, run, "NCHW", "grad_input"));
  EXPECT_TRUE(dx.matches.empty());
  // Nothing fits: the sentence says what was searched and the best residual, and claims nothing.
  EXPECT_NE(dx.summary.find("no hypothesis explains run grad_input"), std::string::npos)
      << dx.summary;
  EXPECT_NE(dx.summary.find("output_layout"), std::string::npos) << dx.summary;
  EXPECT_EQ(dx.summary.find("equals reference"), std::string::npos) << dx.summary;
  EXPECT_GT(dx.tried, 20);
}

TEST(Diagnosis, ClosestWhenAFlipFixesMostOfTheError) {
  Tensor ref = random_tensor({2, 3, 6, 6}, 15);
  Tensor run = flipped(ref, {false, false, true, true});
  for (std::int64_t i = 0; i < run.numel(); ++i)
    run.set(i, run.get(i) * (1 + 1e-3));  // and 1e-3 off
  auto dx = diagnose(input_for(ref, run, "NCHW", "grad_input"));
  EXPECT_TRUE(dx.matches.empty());
  ASSERT_TRUE(dx.closest);
  EXPECT_EQ(dx.closest->spec, "NCHW+flip=HW");
  EXPECT_NE(dx.summary.find("best residual"), std::string::npos) << dx.summary;
}

// With a NaN in the run, every hypothesis keeps an infinite error: none may be offered as the
// "closest" (it printed "cuts the max error from inf to inf").
TEST(Diagnosis, NoClosestHypothesisAgainstAnInfiniteError) {
  Tensor ref = random_tensor({2, 3, 4, 5}, 11);
  Tensor run = random_tensor({2, 3, 4, 5}, 12);
  run.set(7, std::nan(""));
  auto dx = diagnose(input_for(ref, run, "NCHW", "output", "conv2d", "output"));
  EXPECT_TRUE(dx.matches.empty());
  EXPECT_FALSE(dx.closest.has_value()) << dx.summary;
  EXPECT_EQ(dx.summary.find("to inf"), std::string::npos) << dx.summary;
}

// ---- issue 12: every geometry, input side, declared layouts, numbers, loss ----

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

DiagnosisInput conv_input(const Conv& g, const Tensor& ref, const Tensor& run, const Tensor& x,
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

// The first unnamed row: the input read with H and W exchanged, on a geometry where
// nothing is square. Only recomputation can see it: the output is not a permutation of the right
// one.
TEST(Diagnosis, InputReadWithHeightAndWidthExchanged) {
  const Conv g = kOdd;
  Tensor x = random_tensor({g.N, g.C, g.H, g.W}, 21), w = random_tensor({g.O, g.C / g.G, g.KH, g.KW}, 22);
  auto X = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t ww) {
    return x.get(((n * g.C + c) * g.H + h) * g.W + ww);
  };
  // The program's reading: the canonical bytes indexed as if they were [N, C, W, H].
  auto Xswapped = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t ww) {
    return x.get(((n * g.C + c) * g.W + ww) * g.H + h);
  };
  auto Wt = [&](std::int64_t o, std::int64_t c, std::int64_t u, std::int64_t v) {
    return w.get(((o * (g.C / g.G) + c) * g.KH + u) * g.KW + v);
  };
  Tensor ref = g.run(X, Wt, nullptr), run = g.run(Xswapped, Wt, nullptr);
  auto dx = diagnose(conv_input(g, ref, run, x, w, nullptr));
  ASSERT_NE(dx.named(), nullptr) << dx.summary;
  EXPECT_EQ(dx.named()->code, "hw_swapped");
  EXPECT_EQ(dx.named()->tensor, "input");
  EXPECT_EQ(dx.named()->side, "input");
  EXPECT_EQ(dx.named()->params["read_as"], "NCWH");
  EXPECT_FALSE(dx.ambiguous) << dx.summary;
  EXPECT_NE(dx.summary.find("read input.bin with H and W exchanged"), std::string::npos)
      << dx.summary;
}

// The seed lesson: the flip that belongs to the weights applied to the data. With stride 2 and
// dilation it is no re-arrangement of the output; the pair hypothesis names it.
TEST(Diagnosis, FlipOnDataInsteadOfWeights) {
  const Conv g = kOdd;
  Tensor x = random_tensor({g.N, g.C, g.H, g.W}, 23), w = random_tensor({g.O, g.C / g.G, g.KH, g.KW}, 24);
  auto X = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t ww) {
    return x.get(((n * g.C + c) * g.H + h) * g.W + ww);
  };
  auto Xf = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t ww) {
    return X(n, c, g.H - 1 - h, g.W - 1 - ww);
  };
  auto Wt = [&](std::int64_t o, std::int64_t c, std::int64_t u, std::int64_t v) {
    return w.get(((o * (g.C / g.G) + c) * g.KH + u) * g.KW + v);
  };
  auto Wf = [&](std::int64_t o, std::int64_t c, std::int64_t u, std::int64_t v) {
    return Wt(o, c, g.KH - 1 - u, g.KW - 1 - v);
  };
  Tensor ref = g.run(X, Wt, nullptr), run = g.run(Xf, Wf, nullptr);
  auto dx = diagnose(conv_input(g, ref, run, x, w, nullptr));
  // This geometry is symmetric ((H + 2PH - DH(KH-1) - 1) divisible by SH, likewise W): flipping
  // data and weights gives exactly the flipped output, so the tensor alone cannot tell. Honest
  // ambiguity, then the op-level reading settles it: the loss failed, so it was no write mistake.
  ASSERT_NE(dx.named(), nullptr) << dx.summary;
  EXPECT_TRUE(dx.ambiguous) << dx.summary;
  EXPECT_NE(dx.summary.find("Equally consistent"), std::string::npos) << dx.summary;
  std::vector<Entry> entries(2);
  for (auto& e : entries) {
    e.dtype = "float32";
    e.case_name = "c";
    e.op = ops::Op::conv2d;
    e.verdict = Verdict::failed;
  }
  entries[0].tensor = "output";
  entries[0].role = ops::Role::output;
  entries[0].diagnosis = dx;
  entries[1].tensor = "loss";
  entries[1].role = ops::Role::loss;
  refine_op_diagnoses(entries);
  ASSERT_NE(entries[0].diagnosis->named(), nullptr);
  EXPECT_EQ(entries[0].diagnosis->named()->code, "flip_on_data");
  EXPECT_FALSE(entries[0].diagnosis->ambiguous);
  EXPECT_NE(entries[0].diagnosis->summary.find("instead of the weights"), std::string::npos)
      << entries[0].diagnosis->summary;
  // The loss is attributed to it.
  ASSERT_TRUE(entries[1].diagnosis);
  EXPECT_EQ(entries[1].diagnosis->named()->code, "flip_on_data");
  EXPECT_EQ(entries[1].diagnosis->named()->params["follows_from"], "output");
  // Had the loss passed, the output was computed right and written flipped.
  entries[0].diagnosis = dx;
  entries[1].diagnosis.reset();
  entries[1].verdict = Verdict::passed;
  refine_op_diagnoses(entries);
  EXPECT_EQ(entries[0].diagnosis->named()->code, "flipped");
  EXPECT_EQ(entries[0].diagnosis->named()->side, "output");
}

// Weights declared WHIO:F (the bytes of C-order OIHW) while the program indexes them as HWIO.
TEST(Diagnosis, WeightDeclaredWhioFReadAsHwio) {
  const Conv g = kOdd;
  Tensor x = random_tensor({g.N, g.C, g.H, g.W}, 25), w = random_tensor({g.O, g.C / g.G, g.KH, g.KW}, 26);
  const std::int64_t I = g.C / g.G;
  auto X = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t ww) {
    return x.get(((n * g.C + c) * g.H + h) * g.W + ww);
  };
  auto Wt = [&](std::int64_t o, std::int64_t c, std::int64_t u, std::int64_t v) {
    return w.get(((o * I + c) * g.KH + u) * g.KW + v);
  };
  // The file holds C-order OIHW bytes; the program reads element (o,i,h,w) at HWIO's offset.
  auto Whwio = [&](std::int64_t o, std::int64_t c, std::int64_t u, std::int64_t v) {
    return w.get(((u * g.KW + v) * I + c) * g.O + o);
  };
  Tensor ref = g.run(X, Wt, nullptr), run = g.run(X, Whwio, nullptr);
  auto in = conv_input(g, ref, run, x, w, nullptr);
  in.declared = {{"weight", "WHIO:F"}, {"input", "NCHW"}};
  auto dx = diagnose(in);
  ASSERT_NE(dx.named(), nullptr) << dx.summary;
  EXPECT_EQ(dx.named()->code, "weight_layout");
  EXPECT_EQ(dx.named()->params["read_as"], "HWIO");
  EXPECT_EQ(dx.named()->params["declared"], "WHIO:F");
}

TEST(Diagnosis, BiasMissingAndTf32Inputs) {
  const Conv g{3, 5, 11, 6, 7, 2, 3, 1, 2, 0, 1, 2, 1, 1};  // odd_n3_c5_h11_w6
  Tensor x = random_tensor({g.N, g.C, g.H, g.W}, 27), w = random_tensor({g.O, g.C, g.KH, g.KW}, 28),
         b = random_tensor({g.O}, 29);
  auto X = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t ww) {
    return static_cast<double>(x.get(((n * g.C + c) * g.H + h) * g.W + ww));
  };
  auto Wt = [&](std::int64_t o, std::int64_t c, std::int64_t u, std::int64_t v) {
    return static_cast<double>(w.get(((o * g.C + c) * g.KH + u) * g.KW + v));
  };
  // TF32: 10 explicit mantissa bits, round to nearest even (0x1000 is half of the dropped 13 bits).
  auto tf32 = [](double v) {
    float f = static_cast<float>(v);
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    u = (u + 0xFFFu + ((u >> 13) & 1u)) & ~0x1FFFu;
    std::memcpy(&f, &u, 4);
    return static_cast<double>(f);
  };
  Tensor ref = g.run(X, Wt, &b);
  {
    Tensor run = g.run(X, Wt, nullptr);
    auto dx = diagnose(conv_input(g, ref, run, x, w, &b));
    ASSERT_NE(dx.named(), nullptr) << dx.summary;
    EXPECT_EQ(dx.named()->code, "bias_missing");
  }
  {
    Tensor run = g.run([&](auto... i) { return tf32(X(i...)); },
                       [&](auto... i) { return tf32(Wt(i...)); }, &b);
    auto dx = diagnose(conv_input(g, ref, run, x, w, &b));
    ASSERT_NE(dx.named(), nullptr) << dx.summary;
    EXPECT_EQ(dx.named()->code, "rounded_inputs");
    EXPECT_EQ(dx.named()->params["format"], "tf32");
  }
}

// Output side, relative to a declared layout: the program declared NHWC and wrote NWHC bytes; the
// harness read them as NHWC. Not a permutation of the canonical tensor when H != W.
TEST(Diagnosis, OutputWrittenHwSwappedUnderChannelsLastDeclaration) {
  const Shape s = {2, 3, 5, 7};
  Tensor ref = random_tensor(s, 30);
  Tensor bytes = permuted_bytes(ref, {0, 3, 2, 1});  // C-order [N, W, H, C]
  // What the harness made of them: element (n,c,h,w) taken from NHWC's offset.
  Tensor run(DType::float32, s);
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t c = 0; c < 3; ++c)
      for (std::int64_t h = 0; h < 5; ++h)
        for (std::int64_t w = 0; w < 7; ++w)
          run.set(((n * 3 + c) * 5 + h) * 7 + w, bytes.get(((n * 5 + h) * 7 + w) * 3 + c));
  auto in = input_for(ref, run, "NCHW", "output", "conv2d", "output");
  in.declared_layout = "NHWC";
  auto dx = diagnose(in);
  ASSERT_NE(dx.named(), nullptr) << dx.summary;
  EXPECT_EQ(dx.named()->code, "hw_swapped");
  EXPECT_EQ(dx.named()->side, "output");
  EXPECT_EQ(dx.named()->params["bytes"], "NWHC");
}

TEST(Diagnosis, LossAsASumAndGradientsScaled) {
  DiagnosisInput in;
  in.role = ops::Role::loss;
  in.tensor = "loss";
  in.op = ops::Op::conv2d;
  in.input_shapes["output"] = {2, 4, 4, 8};  // 256 elements, batch 2
  in.ref_loss = 1.25;
  in.run_loss = 1.25 * 256;
  auto dx = diagnose(in);
  ASSERT_NE(dx.named(), nullptr) << dx.summary;
  EXPECT_EQ(dx.named()->code, "loss_sum");
  in.run_loss = 1.25 * 128;  // divided by the batch (2) instead of 256
  dx = diagnose(in);
  ASSERT_NE(dx.named(), nullptr) << dx.summary;
  EXPECT_EQ(dx.named()->code, "loss_mean_count");
  EXPECT_EQ(dx.named()->params["divided_by"], 2);

  Tensor ref = random_tensor({3, 5}, 31), run(DType::float32, {3, 5});
  for (std::int64_t i = 0; i < 15; ++i) run.set(i, ref.get(i) * 256);
  auto g = input_for(ref, run, "KN", "grad_B", "matmul", "grad");
  g.input_shapes["output"] = {2, 128};
  auto gx = diagnose(g);
  ASSERT_NE(gx.named(), nullptr) << gx.summary;
  EXPECT_EQ(gx.named()->code, "loss_sum");
}

namespace {

using validate::testing::round_bits;  // narrow_loss.hpp

// conv2d with the running sum (started at the bias) rounded after every add, in the order
// (c, kh, kw) or (kh, kw, c), or `reversed` (c, kh, kw all descending).
template <class R>
Tensor conv_narrow(const Conv& g, const Tensor& x, const Tensor& w, const Tensor* b, R round,
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

bool names_code(const Diagnosis& dx, const std::string& code) {
  for (const auto& h : dx.matches)
    if (h.code == code) return true;
  return false;
}

}  // namespace

// Accumulation in a narrow type on the all-distinct geometries of cases/smoke.json (batch 2 and 3,
// stride, dilation, groups, with and without bias), float32 cases: named with its format and
// summation order, and not taken for operands rounded before the products.
TEST(Diagnosis, NarrowAccumulationIsNamedWithItsFormatAndOrder) {
  const Conv odd3{3, 5, 11, 6, 7, 2, 3, 1, 2, 0, 1, 2, 1, 1};  // odd_n3_c5_h11_w6 (bias)
  struct Row {
    Conv g;
    bool bias, inner;
    int bits;
    const char *format, *order;
  };
  for (const Row& r : {Row{kOdd, false, false, 8, "bfloat16", "c,kh,kw"},
                       Row{odd3, true, true, 11, "float16", "kh,kw,c"},
                       Row{odd3, true, false, 8, "bfloat16", "c,kh,kw"}}) {
    const Conv& g = r.g;
    Tensor x = random_tensor({g.N, g.C, g.H, g.W}, 41), w = random_tensor({g.O, g.C / g.G, g.KH, g.KW}, 42),
           b = random_tensor({g.O}, 43);
    const Tensor* bp = r.bias ? &b : nullptr;
    auto exact = [](double v) { return v; };
    Tensor ref = conv_narrow(g, x, w, bp, exact, false);
    Tensor run = conv_narrow(g, x, w, bp, [&](double v) { return round_bits(static_cast<float>(v), r.bits); }, r.inner);
    auto dx = diagnose(conv_input(g, ref, run, x, w, bp));
    ASSERT_NE(dx.named(), nullptr) << r.format << " " << dx.summary;
    EXPECT_EQ(dx.named()->code, "narrow_accumulation") << dx.summary;
    EXPECT_EQ(dx.named()->params["format"], r.format) << dx.summary;
    EXPECT_EQ(dx.named()->params["order"], r.order) << dx.summary;
    EXPECT_EQ(dx.named()->side, "numeric");
    EXPECT_FALSE(names_code(dx, "rounded_inputs")) << dx.summary;
    // The clear-factor rule: its residual is a small fraction of the clean recompute's.
    EXPECT_LE(dx.named()->max_abs * 4, dx.named()->params["clean_residual"].get<double>());
    EXPECT_NE(dx.summary.find("running sum rounded to " + std::string(r.format)), std::string::npos)
        << dx.summary;
  }
}

// On a bfloat16 case a narrow accumulator can pass the output's loose gate and still move the
// loss: named from the loss alone, with its format, through the op's own reference in each of the
// op's summation orders (ops::ReferenceOptions order + bias_first). The program: bias first, channels
// innermost, each add done in float32 and stored as bfloat16.
TEST(Diagnosis, LossOfANarrowAccumulatorIsNamed) {
  const Conv g = kOdd;
  auto bf16_tensor = [&](const Shape& s, unsigned seed) {
    Tensor t = random_tensor(s, seed);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, validate::testing::bf16(t.get(i)));
    return t;
  };
  const Tensor x = bf16_tensor({g.N, g.C, g.H, g.W}, 46), w = bf16_tensor({g.O, g.C / g.G, g.KH, g.KW}, 47),
               b = bf16_tensor({g.O}, 48);
  const Tensor exact = conv_narrow(g, x, w, &b, [](double v) { return v; }, false);
  const Tensor narrow = conv_narrow(
      g, x, w, &b, [](double v) { return validate::testing::bf16(static_cast<float>(v)); }, true);
  validate::testing::expect_narrow_accumulator_named_from_loss(conv_input(g, exact, exact, x, w, &b), exact,
                                                               narrow, bf16_tensor(exact.shape(), 49));
}

// The other side of the distinction: inputs rounded to bfloat16 before the products (summed
// exactly) are rounded_inputs, never a narrow accumulator; and float32 summation-order noise that
// fails an (absurdly) tight gate is explained by nothing, narrow accumulation included.
TEST(Diagnosis, RoundedInputsAndReorderingNoiseAreNotNarrowAccumulation) {
  const Conv g = kOdd;
  Tensor x = random_tensor({g.N, g.C, g.H, g.W}, 44), w = random_tensor({g.O, g.C / g.G, g.KH, g.KW}, 45);
  auto X = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t ww) {
    return static_cast<double>(x.get(((n * g.C + c) * g.H + h) * g.W + ww));
  };
  auto Wt = [&](std::int64_t o, std::int64_t c, std::int64_t u, std::int64_t v) {
    return static_cast<double>(w.get(((o * (g.C / g.G) + c) * g.KH + u) * g.KW + v));
  };
  Tensor ref = g.run(X, Wt, nullptr);
  {
    Tensor run = g.run([&](auto... i) { return round_bits(X(i...), 8); },
                       [&](auto... i) { return round_bits(Wt(i...), 8); }, nullptr);
    auto dx = diagnose(conv_input(g, ref, run, x, w, nullptr));
    ASSERT_NE(dx.named(), nullptr) << dx.summary;
    EXPECT_EQ(dx.named()->code, "rounded_inputs") << dx.summary;
    EXPECT_EQ(dx.named()->params["format"], "bfloat16");
    EXPECT_FALSE(names_code(dx, "narrow_accumulation")) << dx.summary;
  }
  {
    // float32 accumulation in an order the search does not try: a few float32 units from the
    // float64 reference, and no closer to a float32 accumulator in another order.
    Tensor run = conv_narrow(g, x, w, nullptr, [](double v) { return static_cast<double>(static_cast<float>(v)); },
                             false, true);
    auto in = conv_input(g, ref, run, x, w, nullptr);
    in.rtol = 0;
    in.max_ulp = 0;  // bitwise: the reordering fails it
    auto dx = diagnose(in);
    EXPECT_GT(dx.baseline_max_abs, 0) << "the reordering must fail the bitwise gate";
    EXPECT_FALSE(names_code(dx, "narrow_accumulation")) << dx.summary;
  }
}

// Two mistakes at once, on the all-distinct geometry: the input read with H and W exchanged AND
// the output handed over column-major (its bytes NCHW:F under an NCHW declaration). Neither family
// alone explains it; the pair search names both.
TEST(Diagnosis, InputReadHwSwappedAndOutputWrittenFortranOrder) {
  const Conv g = kOdd;
  Tensor x = random_tensor({g.N, g.C, g.H, g.W}, 51), w = random_tensor({g.O, g.C / g.G, g.KH, g.KW}, 52);
  auto X = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t ww) {
    return x.get(((n * g.C + c) * g.H + h) * g.W + ww);
  };
  auto Xswapped = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t ww) {
    return x.get(((n * g.C + c) * g.W + ww) * g.H + h);
  };
  auto Wt = [&](std::int64_t o, std::int64_t c, std::int64_t u, std::int64_t v) {
    return w.get(((o * (g.C / g.G) + c) * g.KH + u) * g.KW + v);
  };
  Tensor ref = g.run(X, Wt, nullptr);
  Tensor run = permuted_bytes(g.run(Xswapped, Wt, nullptr), {3, 2, 1, 0});
  auto dx = diagnose(conv_input(g, ref, run, x, w, nullptr));
  ASSERT_NE(dx.named(), nullptr) << dx.summary;
  const Hypothesis& h = *dx.named();
  EXPECT_EQ(h.code, "read_write_pair") << dx.summary;
  EXPECT_EQ(h.params["read"]["code"], "hw_swapped");
  EXPECT_EQ(h.params["read"]["tensor"], "input");
  EXPECT_EQ(h.params["read"]["read_as"], "NCWH");
  EXPECT_EQ(h.params["write"]["code"], "fortran_order");
  EXPECT_EQ(h.params["write"]["bytes"], "NCHW:F");
  EXPECT_EQ(h.tensor, "input,output");
  EXPECT_NE(dx.summary.find("two mistakes at once"), std::string::npos) << dx.summary;
  EXPECT_NE(dx.summary.find("read input.bin with H and W exchanged"), std::string::npos) << dx.summary;
  EXPECT_NE(dx.summary.find("wrote output.bin in the opposite memory order"), std::string::npos)
      << dx.summary;
  // Neither mistake alone was enough.
  for (const auto& m : dx.matches) EXPECT_EQ(m.code, "read_write_pair") << m.description;
}

// Weights read in another layout (OHWI bytes declared HWIO: here the file holds C-order OIHW and
// the program reads it as HWIO) AND the output written with H and W exchanged.
TEST(Diagnosis, WeightLayoutAndOutputHwSwapped) {
  const Conv g = kOdd;
  const std::int64_t I = g.C / g.G;
  Tensor x = random_tensor({g.N, g.C, g.H, g.W}, 53), w = random_tensor({g.O, I, g.KH, g.KW}, 54);
  auto X = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t ww) {
    return x.get(((n * g.C + c) * g.H + h) * g.W + ww);
  };
  auto Wt = [&](std::int64_t o, std::int64_t c, std::int64_t u, std::int64_t v) {
    return w.get(((o * I + c) * g.KH + u) * g.KW + v);
  };
  auto Whwio = [&](std::int64_t o, std::int64_t c, std::int64_t u, std::int64_t v) {
    return w.get(((u * g.KW + v) * I + c) * g.O + o);
  };
  Tensor ref = g.run(X, Wt, nullptr);
  Tensor run = permuted_bytes(g.run(X, Whwio, nullptr), {0, 1, 3, 2});
  auto dx = diagnose(conv_input(g, ref, run, x, w, nullptr));
  ASSERT_NE(dx.named(), nullptr) << dx.summary;
  EXPECT_EQ(dx.named()->code, "read_write_pair") << dx.summary;
  EXPECT_EQ(dx.named()->params["read"]["code"], "weight_layout");
  EXPECT_EQ(dx.named()->params["read"]["read_as"], "HWIO");
  EXPECT_EQ(dx.named()->params["write"]["code"], "hw_swapped");
}

// matmul: A read transposed AND the output written transposed; M, K, N all different.
TEST(Diagnosis, MatmulATransposedAndOutputTransposed) {
  const std::int64_t M = 9, K = 6, N = 4;
  Tensor A = random_tensor({M, K}, 55), B = random_tensor({K, N}, 56);
  Tensor ref(DType::float32, {M, N}), bad(DType::float32, {M, N});
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      double s = 0, t = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        s += A.get(m * K + k) * B.get(k * N + n);
        t += A.get(k * M + m) * B.get(k * N + n);  // A's bytes read as [K, M]
      }
      ref.set(m * N + n, s);
      bad.set(m * N + n, t);
    }
  Tensor run = permuted_bytes(bad, {1, 0});
  auto in = input_for(ref, run, "MN", "output", "matmul", "output");
  in.inputs = {{"A", view_of(A)}, {"B", view_of(B)}};
  in.input_shapes = {{"A", A.shape()}, {"B", B.shape()}};
  auto dx = diagnose(in);
  ASSERT_NE(dx.named(), nullptr) << dx.summary;
  EXPECT_EQ(dx.named()->code, "read_write_pair") << dx.summary;
  EXPECT_EQ(dx.named()->params["read"]["code"], "transposed");
  EXPECT_EQ(dx.named()->params["read"]["tensor"], "A");
  EXPECT_EQ(dx.named()->params["write"]["code"], "transposed");
}

// The loss held against the program's own stored output (bfloat16 case, all-distinct geometry):
// a loss on the unrounded output fails even where it is inside the loss gate; the loss of the
// stored output, or the reference's, or a right loss next to a wrongly written output, do not.
TEST(LossRoundingCheck, UnroundedLossFailsAndHonestLossesDoNot) {
  const Conv g = kOdd;
  Tensor x = random_tensor({g.N, g.C, g.H, g.W}, 61), w = random_tensor({g.O, g.C / g.G, g.KH, g.KW}, 62);
  auto bf16 = [](double v) { return round_bits(static_cast<float>(v), 8); };
  for (std::int64_t i = 0; i < x.numel(); ++i) x.set(i, bf16(x.get(i)));
  for (std::int64_t i = 0; i < w.numel(); ++i) w.set(i, bf16(w.get(i)));
  auto X = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t ww) {
    return static_cast<double>(x.get(((n * g.C + c) * g.H + h) * g.W + ww));
  };
  auto Wt = [&](std::int64_t o, std::int64_t c, std::int64_t u, std::int64_t v) {
    return static_cast<double>(w.get(((o * (g.C / g.G) + c) * g.KH + u) * g.KW + v));
  };
  // y in float64 (kept in a double vector: the float32 Tensor would round it), stored as bf16.
  Tensor y32 = g.run(X, Wt, nullptr);
  std::vector<double> y(static_cast<std::size_t>(y32.numel()));
  {
    const std::int64_t CG = g.C / g.G, OG = g.O / g.G;
    std::size_t i = 0;
    for (std::int64_t n = 0; n < g.N; ++n)
      for (std::int64_t o = 0; o < g.O; ++o)
        for (std::int64_t oh = 0; oh < g.HO(); ++oh)
          for (std::int64_t ow = 0; ow < g.WO(); ++ow, ++i) {
            double s = 0;
            for (std::int64_t c = 0; c < CG; ++c)
              for (std::int64_t u = 0; u < g.KH; ++u)
                for (std::int64_t v = 0; v < g.KW; ++v) {
                  const std::int64_t ih = oh * g.SH - g.PH + u * g.DH, iw = ow * g.SW - g.PW + v * g.DW;
                  if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                  s += X(n, (o / OG) * CG + c, ih, iw) * Wt(o, c, u, v);
                }
            y[i] = s;
          }
  }
  Tensor t = random_tensor(y32.shape(), 63), stored(DType::float32, y32.shape());
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, bf16(t.get(i)));
  double lu = 0, ls = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double r = bf16(y[i]);
    stored.set(static_cast<std::int64_t>(i), r);
    lu += (y[i] - t.get(static_cast<std::int64_t>(i))) * (y[i] - t.get(static_cast<std::int64_t>(i)));
    ls += (r - t.get(static_cast<std::int64_t>(i))) * (r - t.get(static_cast<std::int64_t>(i)));
  }
  lu /= static_cast<double>(y.size());
  ls /= static_cast<double>(y.size());
  ASSERT_GT(std::fabs(lu - ls), 1e-5 * ls) << "the geometry must make the rounding visible";
  auto in = conv_input(g, stored, stored, x, w, nullptr);
  in.role = ops::Role::loss;
  in.logical = DType::bfloat16;
  in.inputs["target"] = view_of(t);
  in.input_shapes["target"] = t.shape();
  in.input_shapes["output"] = t.shape();
  in.ref_loss = static_cast<float>(ls);
  // The mistake: the loss of the unrounded output (as float32), with the right stored output.
  in.run_loss = static_cast<float>(lu);
  auto c = check_loss_rounding(in, view_of(stored));
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->failed) << c->ratio;
  EXPECT_LT(c->ratio, LossRoundingCheck::kLimit);
  EXPECT_NEAR(c->unrounded, lu, 1e-12 * lu);
  EXPECT_NEAR(c->stored, ls, 1e-12 * ls);
  EXPECT_NE(c->message.find("loss taken on the unrounded output"), std::string::npos) << c->message;
  EXPECT_NE(c->message.find("round the output to bfloat16 first"), std::string::npos) << c->message;
  // Honest: the loss of the stored output, to float32.
  in.run_loss = static_cast<float>(ls);
  c = check_loss_rounding(in, view_of(stored));
  EXPECT_TRUE(!c || !c->failed);
  // A reduction noisier than 8 float32 units (a naive float32 sum): decided, and still honest.
  in.run_loss = ls * (1 + 40 * std::ldexp(1.0, -24));
  c = check_loss_rounding(in, view_of(stored));
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(c->failed) << c->ratio;
  // The right loss next to an output written in the wrong layout: the loss is the rounded one.
  in.run_loss = static_cast<float>(ls) * (1 + 20 * std::ldexp(1.0, -24));
  Tensor swapped = permuted_bytes(stored, {0, 1, 3, 2});
  c = check_loss_rounding(in, view_of(swapped));
  EXPECT_TRUE(!c || !c->failed) << (c ? c->ratio : 0);
  // float32 cases: nothing to check.
  in.logical = DType::float32;
  EXPECT_FALSE(check_loss_rounding(in, view_of(stored)).has_value());
}
