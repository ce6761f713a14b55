// Each usual layout mistake, made on purpose, must be named; random differences must not be.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "fixture.hpp"
#include "validate/compare/diagnosis.hpp"

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
  in.op = op;
  in.role = role;
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
  EXPECT_EQ(dx.matches[0].spec, "conv2d:weight+flip=HW");
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
  EXPECT_FALSE(dx.closest);
  EXPECT_TRUE(dx.summary.empty());
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
  EXPECT_NE(dx.summary.find("closest"), std::string::npos) << dx.summary;
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
