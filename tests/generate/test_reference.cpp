// The generator against an independent float64 computation of conv2d and matmul from their
// definitions (forward, MSE loss, every gradient), in every dtype, and the error-bound scales.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "generate/generate_fixture.hpp"
#include "validate/generate/inputs.hpp"
#include "validate/generate/torch_reference.hpp"

using namespace validate;
using validate::testing::odd_case;

namespace {

// Direct float64 conv2d + MSE + gradients from the definition (independent of LibTorch).
struct Conv64 {
  std::vector<double> y, gx, gw, gb;
  double loss = 0;
};
Conv64 conv64(const cases::ConvParams& p, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor& t) {
  const auto ho = p.hout(), wo = p.wout(), ipg = p.c / p.groups, opg = p.o / p.groups;
  Conv64 r;
  r.y.assign(static_cast<size_t>(p.n * p.o * ho * wo), 0.0);
  auto X = [&](auto n, auto c, auto h, auto w_) { return ((n * p.c + c) * p.h + h) * p.w + w_; };
  auto W = [&](auto o, auto i, auto kh, auto kw) { return ((o * ipg + i) * p.kh + kh) * p.kw + kw; };
  auto Y = [&](auto n, auto o, auto h, auto w_) { return ((n * p.o + o) * ho + h) * wo + w_; };
  auto for_taps = [&](auto&& fn) {
    for (std::int64_t n = 0; n < p.n; ++n)
      for (std::int64_t o = 0; o < p.o; ++o)
        for (std::int64_t oh = 0; oh < ho; ++oh)
          for (std::int64_t ow = 0; ow < wo; ++ow)
            for (std::int64_t i = 0; i < ipg; ++i)
              for (std::int64_t kh = 0; kh < p.kh; ++kh)
                for (std::int64_t kw = 0; kw < p.kw; ++kw) {
                  std::int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
                  std::int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
                  if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
                  std::int64_t c = (o / opg) * ipg + i;
                  fn(X(n, c, ih, iw), W(o, i, kh, kw), Y(n, o, oh, ow));
                }
  };
  for_taps([&](auto xi, auto wi, auto yi) { r.y[yi] += x.get(xi) * w.get(wi); });
  if (b)
    for (size_t i = 0; i < r.y.size(); ++i) r.y[i] += b->get(static_cast<std::int64_t>((i / (ho * wo)) % p.o));
  std::vector<double> dy(r.y.size());
  for (size_t i = 0; i < r.y.size(); ++i) {
    double d = r.y[i] - t.get(static_cast<std::int64_t>(i));
    r.loss += d * d;
    dy[i] = 2.0 * d / static_cast<double>(r.y.size());
  }
  r.loss /= static_cast<double>(r.y.size());
  r.gx.assign(static_cast<size_t>(x.numel()), 0.0);
  r.gw.assign(static_cast<size_t>(w.numel()), 0.0);
  r.gb.assign(static_cast<size_t>(p.o), 0.0);
  for_taps([&](auto xi, auto wi, auto yi) {
    r.gx[xi] += w.get(wi) * dy[yi];
    r.gw[wi] += x.get(xi) * dy[yi];
  });
  for (size_t i = 0; i < dy.size(); ++i) r.gb[(i / (ho * wo)) % p.o] += dy[i];
  return r;
}

void expect_close(const Tensor& got, const std::vector<double>& want, double rtol, const char* what) {
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size()) << what;
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got.get(static_cast<std::int64_t>(i)), want[i], rtol * scale) << what << " element " << i;
}

}  // namespace

class GeneratorVsFloat64 : public ::testing::TestWithParam<DType> {};

TEST_P(GeneratorVsFloat64, ConvAndMatmulMatchTheDefinition) {
  const DType dt = GetParam();
  auto c = odd_case(dt);
  auto dev = generate::open_torch_device("cpu", false);
  ASSERT_TRUE(dev);
  // float32 accumulates K=12 products: ~1e-6 relative. bfloat16/float16 round the output, dL/dy and
  // each gradient to 8/11 bits: a few 2^-8 / 2^-11 of the tensor's scale.
  const double rtol = dt == DType::float32 ? 2e-6 : dt == DType::bfloat16 ? 1.2e-2 : 2e-3;
  {
    auto in = generate::make_inputs(c, cases::Op::conv2d, 42, generate::Fill::random);
    std::map<std::string, const Tensor*> view;
    for (auto& [k, v] : in) view[k] = &v;
    auto out = generate::torch_compute(c, cases::Op::conv2d, view, *dev);
    ASSERT_TRUE(out) << out.message();
    auto r = conv64(c.params<cases::ConvParams>(), in.at("input"), in.at("weight"), &in.at("bias"), in.at("target"));
    expect_close(out->at("output"), r.y, rtol, "output");
    expect_close(out->at("grad_input"), r.gx, rtol, "grad_input");
    expect_close(out->at("grad_weight"), r.gw, rtol, "grad_weight");
    expect_close(out->at("grad_bias"), r.gb, rtol, "grad_bias");
    EXPECT_NEAR(out->at("loss").get(0), r.loss, rtol * r.loss);
    EXPECT_EQ(out->at("loss").shape(), Shape{});
  }
  {
    auto in = generate::make_inputs(c, cases::Op::matmul, 42, generate::Fill::random);
    std::map<std::string, const Tensor*> view;
    for (auto& [k, v] : in) view[k] = &v;
    auto out = generate::torch_compute(c, cases::Op::matmul, view, *dev);
    ASSERT_TRUE(out) << out.message();
    const auto& mp = c.params<cases::MatmulParams>();
    const auto M = mp.m, K = mp.k, N = mp.n;
    const Tensor &A = in.at("A"), &B = in.at("B"), &T = in.at("target");
    std::vector<double> y(M * N, 0.0), dy(M * N), ga(M * K, 0.0), gb(K * N, 0.0);
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t k = 0; k < K; ++k) y[m * N + n] += A.get(m * K + k) * B.get(k * N + n);
    double loss = 0;
    for (std::int64_t i = 0; i < M * N; ++i) {
      double d = y[i] - T.get(i);
      loss += d * d;
      dy[i] = 2 * d / static_cast<double>(M * N);
    }
    loss /= static_cast<double>(M * N);
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t k = 0; k < K; ++k) {
          ga[m * K + k] += dy[m * N + n] * B.get(k * N + n);
          gb[k * N + n] += A.get(m * K + k) * dy[m * N + n];
        }
    expect_close(out->at("output"), y, rtol, "matmul output");
    expect_close(out->at("grad_A"), ga, rtol, "grad_A");
    expect_close(out->at("grad_B"), gb, rtol, "grad_B");
    EXPECT_NEAR(out->at("loss").get(0), loss, rtol * loss);
  }
}

// The error-bound scales (docs/compare.md, "Error bounds"): for every output and gradient element,
// sqrt of the sum of its squared products, recomputed here from the definition in float64 (the
// dL/dy factor widened as the docs say), on the odd geometry (every axis a different size, batch 2,
// stride, padding, dilation, groups, bias).
TEST_P(GeneratorVsFloat64, ScalesAreTheRootSumSquareOfTheProducts) {
  const DType dt = GetParam();
  auto c = odd_case(dt);
  auto dev = generate::open_torch_device("cpu", false);
  ASSERT_TRUE(dev);
  auto in = generate::make_inputs(c, cases::Op::conv2d, 42, generate::Fill::random);
  std::map<std::string, const Tensor*> view;
  for (auto& [k, v] : in) view[k] = &v;
  auto plain = generate::torch_compute(c, cases::Op::conv2d, view, *dev);
  auto out = generate::torch_compute(c, cases::Op::conv2d, view, *dev, nullptr, nullptr, /*scales=*/true);
  ASSERT_TRUE(plain && out);
  EXPECT_EQ(plain->count("output_scale"), 0u);  // only generate asks for them
  for (const char* t : {"output", "grad_input", "grad_weight", "grad_bias"}) ASSERT_EQ(out->count(std::string(t) + "_scale"), 1u) << t;
  const auto& p = c.params<cases::ConvParams>();
  const Tensor &x = in.at("input"), &w = in.at("weight"), &b = in.at("bias"), &t = in.at("target"), &y = out->at("output");
  const auto ho = p.hout(), wo = p.wout(), ipg = p.c / p.groups, opg = p.o / p.groups;
  const std::size_t ny = static_cast<std::size_t>(y.numel());
  std::vector<double> ry(ny, 0.0), gx(static_cast<size_t>(x.numel()), 0.0), gw(static_cast<size_t>(w.numel()), 0.0), gb(static_cast<size_t>(p.o), 0.0);
  auto taps = [&](auto&& fn) {
    for (std::int64_t n = 0; n < p.n; ++n)
      for (std::int64_t o = 0; o < p.o; ++o)
        for (std::int64_t oh = 0; oh < ho; ++oh)
          for (std::int64_t ow = 0; ow < wo; ++ow)
            for (std::int64_t i = 0; i < ipg; ++i)
              for (std::int64_t kh = 0; kh < p.kh; ++kh)
                for (std::int64_t kw = 0; kw < p.kw; ++kw) {
                  const std::int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
                  const std::int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
                  if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
                  const std::int64_t ci = (o / opg) * ipg + i;
                  fn(((n * p.c + ci) * p.h + ih) * p.w + iw, ((o * ipg + i) * p.kh + kh) * p.kw + kw,
                     ((n * p.o + o) * ho + oh) * wo + ow, o);
                }
  };
  taps([&](auto xi, auto wi, auto yi, auto) { ry[yi] += std::pow(x.get(xi) * w.get(wi), 2); });
  for (std::size_t i = 0; i < ny; ++i) ry[i] = std::sqrt(ry[i] + std::pow(b.get(static_cast<std::int64_t>((i / (ho * wo)) % p.o)), 2));
  // dL/dy's magnitude in units of the case dtype's unit roundoff u_d.
  const double u = std::ldexp(1.0, -24);
  const double ud = dt == DType::bfloat16 ? std::ldexp(1.0, -8) : dt == DType::float16 ? std::ldexp(1.0, -11) : u;
  const double half_sub = dt == DType::bfloat16 ? std::ldexp(1.0, -134) : dt == DType::float16 ? std::ldexp(1.0, -25) : std::ldexp(1.0, -150);
  const double k1 = static_cast<double>(ipg * p.kh * p.kw + 1), N = static_cast<double>(ny);
  std::vector<double> m(ny);
  for (std::size_t i = 0; i < ny; ++i) {
    const double yi = y.get(static_cast<std::int64_t>(i)), ay = std::abs(yi);
    m[i] = 2 * std::abs(yi - t.get(static_cast<std::int64_t>(i))) / N +
           2 / N * ((dt == DType::float32 ? 0 : 2) * ay + std::sqrt(k1) * (u / ud) * (ay + ry[i])) + half_sub / ud;
  }
  // A gradient's scale also carries its actual products for the accumulation term (bounds.hpp,
  // split_gradient): c^2 = m^2 + n (u/u_d)^2 (dy + u_d m)^2, n the largest of the gradients'
  // reduction lengths numel(y) K / numel(leaf) (the bias: numel(y) / O).
  const double K = k1 - 1;
  double n_max = 1;
  for (double leaf : {static_cast<double>(x.numel()), static_cast<double>(w.numel())})
    n_max = std::max(n_max, std::ceil(N * K / leaf));
  n_max = std::max(n_max, std::ceil(N / static_cast<double>(p.o)));
  std::vector<double> c2(ny);
  for (std::size_t i = 0; i < ny; ++i) {
    const double dy = 2 * std::abs(y.get(static_cast<std::int64_t>(i)) - t.get(static_cast<std::int64_t>(i))) / N;
    c2[i] = m[i] * m[i] + n_max * (u / ud) * (u / ud) * std::pow(dy + ud * m[i], 2);
  }
  taps([&](auto xi, auto wi, auto yi, auto o) {
    gx[xi] += std::pow(w.get(wi), 2) * c2[yi];
    gw[wi] += std::pow(x.get(xi), 2) * c2[yi];
    (void)o;
  });
  for (std::size_t i = 0; i < ny; ++i) gb[(i / (ho * wo)) % p.o] += c2[i];
  for (auto* v : {&gx, &gw, &gb})
    for (double& e : *v) e = std::sqrt(e);
  // float32 sums of positive terms: a few float32 units, relative to each tensor's largest scale.
  expect_close(out->at("output_scale"), ry, 1e-5, "output_scale");
  expect_close(out->at("grad_input_scale"), gx, 1e-5, "grad_input_scale");
  expect_close(out->at("grad_weight_scale"), gw, 1e-5, "grad_weight_scale");
  expect_close(out->at("grad_bias_scale"), gb, 1e-5, "grad_bias_scale");
  // Each scale is at least its element's magnitude (|y| <= sqrt(n) rho, and rho > 0 everywhere).
  for (std::int64_t i = 0; i < y.numel(); ++i) EXPECT_GT(out->at("output_scale").get(i), 0) << i;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GeneratorVsFloat64, ::testing::Values(DType::float32, DType::bfloat16, DType::float16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// A CPU reference in bfloat16/float16 is the float32-accumulated product rounded once, not what
// LibTorch 1.13's bfloat16 GEMM gives on such shapes (it accumulates in bfloat16: several ULP off).
// The geometry is the smoke set's grouped case, where 1.13 was off on 159 of 224 outputs.
TEST_P(GeneratorVsFloat64, LowPrecisionMatmulOutputIsRoundedOnce) {
  const DType dt = GetParam();
  if (dt == DType::float32) GTEST_SKIP() << "float32 is covered by ConvAndMatmulMatchTheDefinition";
  cases::Case c = odd_case(dt);
  auto& cp = c.params<cases::ConvParams>();
  cp.c = 6; cp.w = 9; cp.o = 4;
  c.params<cases::MatmulParams>() = cases::im2col_gemm(cp);
  ASSERT_EQ(c.params<cases::MatmulParams>().k, 18);
  auto dev = generate::open_torch_device("cpu", false);
  ASSERT_TRUE(dev);
  auto in = generate::make_inputs(c, cases::Op::matmul, 42, generate::Fill::random);
  std::map<std::string, const Tensor*> view;
  for (auto& [k, v] : in) view[k] = &v;
  auto out = generate::torch_compute(c, cases::Op::matmul, view, *dev);
  ASSERT_TRUE(out) << out.message();
  const int digits = dt == DType::bfloat16 ? 8 : 11;
  const auto& mp = c.params<cases::MatmulParams>();
  const auto M = mp.m, K = mp.k, N = mp.n;
  const Tensor &A = in.at("A"), &B = in.at("B");
  int off = 0;
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      double exact = 0, mag = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        exact += A.get(m * K + k) * B.get(k * N + n);
        mag += std::abs(A.get(m * K + k) * B.get(k * N + n));
      }
      // Half an ULP of the dtype at |exact|, plus float32 accumulation error.
      const double half_ulp = std::ldexp(1.0, std::ilogb(exact) - digits);
      const double got = out->at("output").get(m * N + n);
      if (std::abs(got - exact) > half_ulp + mag * K * 0x1p-24) ++off;
    }
  EXPECT_EQ(off, 0) << off << " of " << M * N << " outputs are not the exact product rounded once";
}

namespace {

// x rounded to nearest-even with `digits` significand bits and smallest normal exponent emin.
double round_digits(double x, int digits, int emin) {
  if (x == 0) return 0;
  const double q = std::ldexp(1.0, std::max(std::ilogb(x), emin) - (digits - 1));
  return std::nearbyint(x / q) * q;
}

// The op of case c on its seed-42 inputs `in`, computed on the CPU with its error-bound scales
// and stored choice terms.
Result<std::map<std::string, Tensor>> computed_with_scales(const cases::Case& c, cases::Op op,
                                                           const std::map<std::string, Tensor>& in) {
  auto dev = generate::open_torch_device("cpu", false);
  if (!dev) return dev.status();
  std::map<std::string, const Tensor*> view;
  for (auto& [k, v] : in) view[k] = &v;
  return generate::torch_compute(c, op, view, *dev, nullptr, nullptr, /*scales=*/true);
}

}  // namespace

// A bfloat16/float16 gradient's stored dL/dy choice term (docs/compare.md, "dL/dy's rounding,
// stored"), against float64 sums from the definition on the odd case's im2col GEMM (M, K, N all
// different): Z holds the exact move between dL/dy kept in float32 and rounded (|Dg| <= Z), and its
// root term lies between the part every element carries (dL/dy's float32 evaluation) and what it
// would be if every output element could round the other way.
TEST_P(GeneratorVsFloat64, ChoiceTermHoldsTheKeptVersusRoundedMove) {
  const DType dt = GetParam();
  auto c = odd_case(dt);
  const auto in = generate::make_inputs(c, cases::Op::matmul, 42, generate::Fill::random);
  auto out = computed_with_scales(c, cases::Op::matmul, in);
  ASSERT_TRUE(out) << out.message();
  if (dt == DType::float32) {
    EXPECT_EQ(out->count("grad_A_choice"), 0u);  // nothing is rounded to the case dtype
    return;
  }
  ASSERT_EQ(out->count("grad_A_choice"), 1u);
  ASSERT_EQ(out->count("grad_B_choice"), 1u);
  const auto& mp = c.params<cases::MatmulParams>();
  const std::int64_t M = mp.m, K = mp.k, N = mp.n;
  ASSERT_TRUE(M != K && K != N && M != N);
  const Tensor &A = in.at("A"), &B = in.at("B"), &t = in.at("target"), &y = out->at("output");
  const int digits = dt == DType::bfloat16 ? 8 : 11, emin = dt == DType::bfloat16 ? -126 : -14;
  const double u = std::ldexp(1.0, -24), n_out = static_cast<double>(M * N);
  auto ulp = [&](double v) { return std::ldexp(1.0, std::max(std::ilogb(std::abs(v)), emin) - (digits - 1)); };
  std::vector<double> D(static_cast<size_t>(M * N)), floor2(D.size()), cap2(D.size());
  const double n_max = std::max(std::ceil(n_out * K / static_cast<double>(M * K)), std::ceil(n_out * K / static_cast<double>(K * N)));
  for (std::int64_t i = 0; i < M * N; ++i) {
    // dL/dy as generate evaluates it: the difference in float32, times 2/N in float32.
    const double dy = static_cast<float>(y.get(i) - t.get(i)) * static_cast<float>(2.0 / n_out);
    D[static_cast<size_t>(i)] = round_digits(dy, digits, emin) - dy;
    const double eval = 2 * u * std::abs(dy), a_lo = std::abs(dy) + eval;
    // Every element flipped: dL/dy moves by (2/N) ULP(y) and two ULPs of dL/dy at most.
    const double f_cap = eval + 2 / n_out * ulp(y.get(i)) + 2 * ulp(std::abs(dy) + 2 / n_out * ulp(y.get(i)));
    const double a_cap = std::abs(dy) + f_cap + std::abs(D[static_cast<size_t>(i)]);
    floor2[static_cast<size_t>(i)] = eval * eval + 2 * n_max * u * u * a_lo * a_lo;
    cap2[static_cast<size_t>(i)] = f_cap * f_cap + 2 * n_max * u * u * a_cap * a_cap;
  }
  auto check = [&](const char* name, std::int64_t rows, std::int64_t cols, auto other, auto out_index) {
    const Tensor& z = out->at(std::string(name) + "_choice");
    ASSERT_EQ(z.numel(), rows * cols) << name;
    int below = 0, outside = 0;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t q = 0; q < cols; ++q) {
        double dg = 0, lo = 0, hi = 0;  // over the products of element (r, q)
        for (std::int64_t j = 0; j < (rows == M ? N : M); ++j) {
          const std::size_t o = static_cast<std::size_t>(out_index(r, q, j));
          const double x = other(r, q, j);
          dg += D[o] * x, lo += floor2[o] * x * x, hi += cap2[o] * x * x;
        }
        const double zi = z.get(r * cols + q), rest = zi - std::abs(dg);
        below += zi < std::abs(dg) * (1 - 1e-5);
        outside += rest < 8 * std::sqrt(lo) * (1 - 1e-3) || rest > 8 * std::sqrt(hi) * (1 + 1e-3);
      }
    EXPECT_EQ(below, 0) << name << ": elements whose choice term is below the exact |Dg|";
    EXPECT_EQ(outside, 0) << name << ": elements whose root term is outside its floor and cap";
  };
  // grad_A[m, k] = sum_n dy[m, n] B[k, n]; grad_B[k, n] = sum_m A[m, k] dy[m, n].
  check("grad_A", M, K, [&](auto, auto k, auto n) { return B.get(k * N + n); }, [&](auto m, auto, auto n) { return m * N + n; });
  check("grad_B", K, N, [&](auto k, auto, auto m) { return A.get(m * K + k); }, [&](auto, auto n, auto m) { return m * N + n; });
}

// An output's stored bias-after term (docs/compare.md, "The bias added after the sum, stored"),
// against float64 sums from the definition on the odd conv2d case (batch 2, every axis a different
// size): W covers the other route's stored output, round(round(s) + bias), against the reference's
// at every element, s the exact sum; its flip allowance (one ULP of round(s) and of the output) is
// taken only near a rounding boundary of s; and the routes do differ somewhere (the term is not 0).
TEST_P(GeneratorVsFloat64, BiasAfterTermHoldsTheOtherRoute) {
  const DType dt = GetParam();
  auto c = odd_case(dt);
  const auto in = generate::make_inputs(c, cases::Op::conv2d, 42, generate::Fill::random);
  auto out = computed_with_scales(c, cases::Op::conv2d, in);
  ASSERT_TRUE(out) << out.message();
  if (dt == DType::float32) {
    EXPECT_EQ(out->count("output_choice"), 0u);  // nothing is rounded to the case dtype
    return;
  }
  ASSERT_EQ(out->count("output_choice"), 1u);
  const auto& p = c.params<cases::ConvParams>();
  ASSERT_GT(p.n, 1);
  const auto r = conv64(p, in.at("input"), in.at("weight"), nullptr, in.at("target"));  // s: no bias
  const Tensor &y = out->at("output"), &w = out->at("output_choice"), &b = in.at("bias");
  ASSERT_EQ(w.numel(), y.numel());
  const int digits = dt == DType::bfloat16 ? 8 : 11, emin = dt == DType::bfloat16 ? -126 : -14;
  auto ulp = [&](double v) { return std::ldexp(1.0, std::max(std::ilogb(std::abs(v)), emin) - (digits - 1)); };
  const std::int64_t plane = p.hout() * p.wout();
  int uncovered = 0, moved = 0, allowed = 0, too_wide = 0;
  for (std::int64_t i = 0; i < y.numel(); ++i) {
    const double s = r.y[static_cast<size_t>(i)], bias = b.get((i / plane) % p.o);
    const double rs = round_digits(s, digits, emin);
    const double after = round_digits(static_cast<double>(static_cast<float>(rs + bias)), digits, emin);
    const double move = std::abs(after - y.get(i)), wi = w.get(i);
    uncovered += wi < move;
    moved += move > 0;
    allowed += wi > move;
    // A flip of round(s) moves the other route by at most one ULP of round(s) and one of the
    // output; the allowance is that step, and generate's float32 s may itself sit across it.
    too_wide += wi > move + 2 * (ulp(rs) + ulp(std::abs(after) + ulp(rs)));
  }
  EXPECT_EQ(uncovered, 0) << "elements whose bias-after term is below the other route's move";
  EXPECT_GT(moved, 0) << "the two routes agree everywhere: the test cannot fail";
  EXPECT_EQ(too_wide, 0);
  EXPECT_LT(allowed * 10, y.numel()) << allowed << " of " << y.numel() << " elements carry a flip allowance";
}

// With 2/N a power of two (here N = 8 x 16 outputs) dL/dy = 2 (y - t) / N is exact in float32, so
// its rounding to the case dtype is the same in every stack that rounds to nearest even, ties
// included: the stored choice term then carries no allowance for dL/dy near a rounding boundary.
// Against float64 sums on a matmul with M, K, N all different: Z holds the exact kept-versus-
// rounded move, and its root term stays under what the output's flips and the float32 sums alone
// allow, although some dL/dy values are exact ties.
TEST_P(GeneratorVsFloat64, ChoiceTermHasNoTieAllowanceWhenDlDyIsExact) {
  const DType dt = GetParam();
  if (dt == DType::float32) GTEST_SKIP() << "no dL/dy is rounded to float32";
  auto c = odd_case(dt);
  auto& mp = c.params<cases::MatmulParams>();
  mp.m = 8, mp.k = 12, mp.n = 16;
  const auto in = generate::make_inputs(c, cases::Op::matmul, 42, generate::Fill::random);
  auto out = computed_with_scales(c, cases::Op::matmul, in);
  ASSERT_TRUE(out) << out.message();
  const std::int64_t M = mp.m, K = mp.k, N = mp.n;
  const Tensor &A = in.at("A"), &B = in.at("B"), &t = in.at("target"), &y = out->at("output");
  const Tensor& z = out->at("grad_A_choice");
  const int digits = dt == DType::bfloat16 ? 8 : 11, emin = dt == DType::bfloat16 ? -126 : -14;
  const double u = std::ldexp(1.0, -24), n_out = static_cast<double>(M * N);
  auto ulp = [&](double v) { return std::ldexp(1.0, std::max(std::ilogb(std::abs(v)), emin) - (digits - 1)); };
  std::vector<double> D(static_cast<size_t>(M * N)), cap2(D.size());
  int ties = 0;
  const double n_max = std::max(static_cast<double>(N), static_cast<double>(M));
  for (std::int64_t i = 0; i < M * N; ++i) {
    const double dy = (y.get(i) - t.get(i)) * (2.0 / n_out);  // exact: 2/N is a power of two
    const double r = round_digits(dy, digits, emin);
    D[static_cast<size_t>(i)] = r - dy;
    ties += dy != r && std::abs(std::abs(dy - r) - ulp(dy) / 2) < 1e-30 * ulp(dy);
    // An output that may round the other way (its exact sum within 1.5 times generate's window of
    // a rounding boundary: a superset of generate's float32 test): dL/dy moves by (2/N) ULP(y)
    // and its rounding by one ULP. No allowance for a dL/dy at or near a boundary.
    double v = 0, rho2 = 0;
    for (std::int64_t k = 0; k < K; ++k) {
      const double p = A.get((i / N) * K + k) * B.get(k * N + i % N);
      v += p, rho2 += p * p;
    }
    const double window = 2 * 8 * u * (std::sqrt(K + 1.0) * (std::abs(v) + std::sqrt(rho2)) + std::sqrt(rho2));
    const double yi = y.get(i), to_boundary = ulp(yi) / 2 - std::abs(v - yi);  // yi: v rounded
    const bool flips = to_boundary <= 1.5 * window + ulp(yi) / 4 * (std::abs(yi) == std::ldexp(1.0, std::ilogb(std::abs(yi))));
    const double f_cap = 2 * u * std::abs(dy) + (flips ? 2 / n_out * ulp(yi) + ulp(std::abs(dy) + 2 / n_out * ulp(yi)) : 0.0);
    const double a_cap = std::abs(dy) + f_cap + std::abs(D[static_cast<size_t>(i)]);
    cap2[static_cast<size_t>(i)] = f_cap * f_cap + 2 * n_max * u * u * a_cap * a_cap;
  }
  EXPECT_GT(ties, 0) << "no dL/dy is an exact tie: the test cannot fail";
  int below = 0, over = 0;
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t k = 0; k < K; ++k) {
      double dg = 0, hi = 0;  // grad_A[m, k] = sum_n dy[m, n] B[k, n]
      for (std::int64_t n = 0; n < N; ++n) {
        const double x = B.get(k * N + n);
        dg += D[static_cast<size_t>(m * N + n)] * x, hi += cap2[static_cast<size_t>(m * N + n)] * x * x;
      }
      const double zi = z.get(m * K + k);
      below += zi < std::abs(dg) * (1 - 1e-5);
      over += zi - std::abs(dg) > 8 * std::sqrt(hi) * (1 + 1e-3);
    }
  EXPECT_EQ(below, 0) << "elements whose choice term is below the exact |Dg|";
  EXPECT_EQ(over, 0) << "elements whose root term exceeds the flips and sums alone";
}
