// Every geometry, input side, declared layouts, numbers and loss: mistakes named on shapes where
// every axis has its own size.
#include <gtest/gtest.h>

#include "diagnosis_fixture.hpp"

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
  // A loss that passed within its bound (a bfloat16 case) while a gradient failed and names nothing
  // of its own: a written mistake would have left the gradient right, so the read one is kept and
  // the gradient follows from it.
  entries[0].diagnosis = dx;
  entries.emplace_back();
  Entry& grad = entries.back();
  grad.dtype = "float32";
  grad.case_name = "c";
  grad.op = ops::Op::conv2d;
  grad.tensor = "grad_input";
  grad.role = ops::Role::grad;
  grad.verdict = Verdict::failed;
  grad.diagnosis = Diagnosis{};
  grad.diagnosis->tried = 24;
  refine_op_diagnoses(entries);
  EXPECT_EQ(entries[0].diagnosis->named()->code, "flip_on_data");
  ASSERT_NE(entries[2].diagnosis->named(), nullptr);
  EXPECT_EQ(entries[2].diagnosis->named()->params["follows_from"], "output");
  // A failing gradient that names its own written mistake says nothing about the output's values.
  entries[0].diagnosis = dx;
  Hypothesis own;
  own.code = "hw_swapped";
  own.side = "output";
  own.passes = true;
  entries[2].diagnosis = Diagnosis{};
  entries[2].diagnosis->matches = {own};
  refine_op_diagnoses(entries);
  EXPECT_EQ(entries[0].diagnosis->named()->code, "flipped");
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

// A Fortran program's input x(C,H,W,N) (declared CHWN:F) read with H and W exchanged: the mistake
// is spelt in the declaration's notation, CWHN:F, with the C-order name of the same bytes after it.
TEST(Diagnosis, FortranInputReadHwSwappedIsSpeltInFortranNotation) {
  const Conv g = kOdd;
  ASSERT_NE(g.H, g.W);
  Tensor x = random_tensor({g.N, g.C, g.H, g.W}, 31), w = random_tensor({g.O, g.C / g.G, g.KH, g.KW}, 32);
  const std::int64_t I = g.C / g.G;
  auto X = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t ww) {
    return x.get(((n * g.C + c) * g.H + h) * g.W + ww);
  };
  auto Wt = [&](std::int64_t o, std::int64_t c, std::int64_t u, std::int64_t v) {
    return w.get(((o * I + c) * g.KH + u) * g.KW + v);
  };
  // The file: x in CHWN:F, byte position c + C (h + H (w + W n)). The program reads (n,c,h,w) at
  // c + C (w + W (h + H n)) — the CWHN:F offset — and gets whatever the file holds there.
  auto Xread = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t ww) {
    const std::int64_t p = c + g.C * (ww + g.W * (h + g.H * n));
    const std::int64_t c2 = p % g.C, r = p / g.C, h2 = r % g.H, r2 = r / g.H, w2 = r2 % g.W, n2 = r2 / g.W;
    return X(n2, c2, h2, w2);
  };
  Tensor ref = g.run(X, Wt, nullptr), run = g.run(Xread, Wt, nullptr);
  auto in = conv_input(g, ref, run, x, w, nullptr);
  in.declared = {{"input", "CHWN:F"}, {"weight", "OIHW"}};
  auto dx = diagnose(in);
  ASSERT_NE(dx.named(), nullptr) << dx.summary;
  EXPECT_EQ(dx.named()->tensor, "input") << dx.summary;
  EXPECT_NE(dx.named()->description.find("it read the bytes as CWHN:F (NHWC in C order)"), std::string::npos)
      << dx.named()->description;
  EXPECT_EQ(dx.named()->params["read_as"], "NHWC");  // the JSON keeps the C spelling
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
