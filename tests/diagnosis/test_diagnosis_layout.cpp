// Each usual layout mistake, made on purpose, must be named; random differences must not be.
#include <gtest/gtest.h>

#include "diagnosis_fixture.hpp"

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
  // Nothing fits: the sentence says what was searched, and claims nothing.
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
  // Kept for tools (JSON "closest"), never offered as a lead in the sentence: it does not explain
  // the run.
  EXPECT_NE(dx.summary.find("no hypothesis explains"), std::string::npos) << dx.summary;
  EXPECT_EQ(dx.summary.find("flip"), std::string::npos) << dx.summary;
  EXPECT_EQ(dx.summary.find("residual"), std::string::npos) << dx.summary;
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
