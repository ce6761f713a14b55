// Narrow accumulation named with its format and summation order, and told apart from inputs
// rounded before the products and from reordering noise.
#include <gtest/gtest.h>

#include "diagnosis_fixture.hpp"

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

// A rounding-sized failure (compare's verdict, DiagnosisInput::rounding_sized) is searched for the
// narrow arithmetic alone: a narrow accumulator is still named with its format and order, and a
// layout is never tried — the input read with H and W exchanged, which the full search names, is
// not named, and no layout family runs.
TEST(Diagnosis, ARoundingSizedFailureIsSearchedForNarrowArithmeticOnly) {
  const Conv g = kOdd;
  const Tensor x = random_tensor({g.N, g.C, g.H, g.W}, 51), w = random_tensor({g.O, g.C / g.G, g.KH, g.KW}, 52);
  const Tensor ref = conv_narrow(g, x, w, nullptr, [](double v) { return v; }, false);
  const Tensor narrow =
      conv_narrow(g, x, w, nullptr, [](double v) { return round_bits(static_cast<float>(v), 8); }, false);
  DiagnosisInput in = conv_input(g, ref, narrow, x, w, nullptr);
  in.rounding_sized = true;
  const auto dx = diagnose(in);
  ASSERT_NE(dx.named(), nullptr) << dx.summary;
  EXPECT_EQ(dx.named()->code, "narrow_accumulation") << dx.summary;
  EXPECT_EQ(dx.named()->params["format"], "bfloat16") << dx.summary;
  EXPECT_EQ(dx.named()->params["order"], "c,kh,kw") << dx.summary;
  for (const auto& f : dx.families) EXPECT_EQ(f, "numeric") << dx.summary;

  auto X = [&](std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t ww) {
    return x.get(((n * g.C + c) * g.W + ww) * g.H + h);  // the canonical bytes read as [N, C, W, H]
  };
  auto Wt = [&](std::int64_t o, std::int64_t c, std::int64_t u, std::int64_t v) {
    return w.get(((o * (g.C / g.G) + c) * g.KH + u) * g.KW + v);
  };
  const Tensor swapped = g.run(X, Wt, nullptr);
  DiagnosisInput sw = conv_input(g, ref, swapped, x, w, nullptr);
  const auto full = diagnose(sw);
  ASSERT_NE(full.named(), nullptr) << full.summary;
  ASSERT_EQ(full.named()->code, "hw_swapped") << full.summary;
  sw.rounding_sized = true;
  const auto numeric_only = diagnose(sw);
  EXPECT_EQ(numeric_only.named(), nullptr) << numeric_only.summary;
  for (const auto& f : numeric_only.families) EXPECT_EQ(f, "numeric") << numeric_only.summary;
  EXPECT_TRUE(numeric_only.profile.empty()) << numeric_only.profile.dump();
}
