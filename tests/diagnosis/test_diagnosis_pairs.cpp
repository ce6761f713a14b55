// Two mistakes at once: the pair search names both where neither family alone explains the run.
#include <gtest/gtest.h>

#include "diagnosis_fixture.hpp"

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
