#pragma once
// Shared by the gpu tests: the device check every device test starts with, and a float64 CPU
// reference of conv2d and matmul (forward, MSE loss, gradients) written from the definitions, so
// the cuDNN runner is held to the math rather than to another library.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "validate/cases/case.hpp"
#include "validate/core/rng.hpp"
#include "validate/core/tensor.hpp"
#include "validate/gpu/device.hpp"

// Skips the test (reported by ctest as skipped) when no CUDA device can be opened.
#define VALIDATE_REQUIRE_GPU()                                             \
  do {                                                                     \
    if (::validate::Status _st = ::validate::gpu::require_device(0); !_st) \
      GTEST_SKIP() << "no CUDA device: " << _st.message();                 \
  } while (0)

namespace validate::testing_gpu {

// N(0,1)*scale from the harness RNG, rounded to `logical`, stored as the reference stores it.
inline Tensor random_tensor(const Shape& shape, DType logical, const std::string& key,
                            float scale = 1.f) {
  Philox rng(7, "gpu_tests", "x", key);
  Tensor f(DType::float32, shape);
  rng.fill_normal(f.data<float>(), static_cast<std::uint64_t>(f.numel()), scale);
  for (std::int64_t i = 0; i < f.numel(); ++i)
    f.data<float>()[i] = round_to_dtype(f.data<float>()[i], logical);
  return logical == DType::float16 ? f.to(DType::float16) : std::move(f);
}

using Tensors = std::map<std::string, Tensor>;

inline Tensors conv_inputs(const cases::Case& c) {
  Tensors in;
  for (const auto& t : c.inputs(cases::Op::conv2d)) {
    const float scale = t.name == "weight" ? 1.f / std::sqrt(static_cast<float>(c.conv.k()))
                        : t.name == "bias" ? 0.1f
                                           : 1.f;
    in.emplace(t.name, random_tensor(t.shape, c.dtype, "conv_" + t.name, scale));
  }
  return in;
}

inline Tensors matmul_inputs(const cases::Case& c) {
  Tensors in;
  for (const auto& t : c.inputs(cases::Op::matmul)) {
    const float scale = t.name == "B" ? 1.f / std::sqrt(static_cast<float>(c.matmul.k)) : 1.f;
    in.emplace(t.name, random_tensor(t.shape, c.dtype, "mm_" + t.name, scale));
  }
  return in;
}

// float64 results, canonical layout: output, loss, grad_input, grad_weight, grad_bias.
inline std::map<std::string, std::vector<double>> conv_reference(const cases::Case& c,
                                                                 const Tensors& in) {
  const auto& p = c.conv;
  const std::int64_t ho = p.hout(), wo = p.wout(), cg = p.c / p.groups, og = p.o / p.groups;
  const Tensor& x = in.at("input");
  const Tensor& w = in.at("weight");
  const Tensor& t = in.at("target");
  auto X = [&](std::int64_t n, std::int64_t ch, std::int64_t h, std::int64_t ww) {
    return ((n * p.c + ch) * p.h + h) * p.w + ww;
  };
  auto W = [&](std::int64_t o, std::int64_t i, std::int64_t h, std::int64_t ww) {
    return ((o * cg + i) * p.kh + h) * p.kw + ww;
  };
  auto Y = [&](std::int64_t n, std::int64_t o, std::int64_t h, std::int64_t ww) {
    return ((n * p.o + o) * ho + h) * wo + ww;
  };
  std::map<std::string, std::vector<double>> r;
  auto& y = r["output"];
  y.assign(static_cast<std::size_t>(p.n * p.o * ho * wo), 0.0);
  // Visits every (output, input, weight) triple of the convolution.
  auto each = [&](auto&& f) {
    for (std::int64_t n = 0; n < p.n; ++n)
      for (std::int64_t o = 0; o < p.o; ++o)
        for (std::int64_t oh = 0; oh < ho; ++oh)
          for (std::int64_t ow = 0; ow < wo; ++ow)
            for (std::int64_t i = 0; i < cg; ++i)
              for (std::int64_t kh = 0; kh < p.kh; ++kh)
                for (std::int64_t kw = 0; kw < p.kw; ++kw) {
                  const std::int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
                  const std::int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
                  if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
                  f(Y(n, o, oh, ow), X(n, (o / og) * cg + i, ih, iw), W(o, i, kh, kw));
                }
  };
  each([&](std::int64_t yi, std::int64_t xi, std::int64_t wi) { y[yi] += x.get(xi) * w.get(wi); });
  if (p.bias)
    for (std::size_t i = 0; i < y.size(); ++i)
      y[i] += in.at("bias").get(static_cast<std::int64_t>((i / (ho * wo)) % p.o));
  // The output as the device stores it, then the loss exactly as defined.
  const double numel = static_cast<double>(y.size());
  std::vector<double> dy(y.size());
  double sum = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double yr = round_to_dtype(static_cast<float>(y[i]), c.dtype);
    const double d = yr - t.get(static_cast<std::int64_t>(i));
    sum += d * d;
    dy[i] = 2.0 * d / numel;
  }
  r["loss"] = {sum / numel};
  auto& dx = r["grad_input"];
  auto& dw = r["grad_weight"];
  dx.assign(static_cast<std::size_t>(x.numel()), 0.0);
  dw.assign(static_cast<std::size_t>(w.numel()), 0.0);
  each([&](std::int64_t yi, std::int64_t xi, std::int64_t wi) {
    dx[xi] += dy[yi] * w.get(wi);
    dw[wi] += dy[yi] * x.get(xi);
  });
  if (p.bias) {
    auto& db = r["grad_bias"];
    db.assign(static_cast<std::size_t>(p.o), 0.0);
    for (std::size_t i = 0; i < dy.size(); ++i) db[(i / (ho * wo)) % p.o] += dy[i];
  }
  return r;
}

inline std::map<std::string, std::vector<double>> matmul_reference(const cases::Case& c,
                                                                   const Tensors& in) {
  const auto& mp = c.matmul;
  const Tensor& a = in.at("A");
  const Tensor& b = in.at("B");
  const Tensor& t = in.at("target");
  std::map<std::string, std::vector<double>> r;
  auto& y = r["output"];
  y.assign(static_cast<std::size_t>(mp.m * mp.n), 0.0);
  for (std::int64_t i = 0; i < mp.m; ++i)
    for (std::int64_t k = 0; k < mp.k; ++k)
      for (std::int64_t j = 0; j < mp.n; ++j)
        y[i * mp.n + j] += a.get(i * mp.k + k) * b.get(k * mp.n + j);
  std::vector<double> dy(y.size());
  double sum = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double d =
        round_to_dtype(static_cast<float>(y[i]), c.dtype) - t.get(static_cast<std::int64_t>(i));
    sum += d * d;
    dy[i] = 2.0 * d / static_cast<double>(y.size());
  }
  r["loss"] = {sum / static_cast<double>(y.size())};
  auto& da = r["grad_A"];
  auto& db = r["grad_B"];
  da.assign(static_cast<std::size_t>(a.numel()), 0.0);
  db.assign(static_cast<std::size_t>(b.numel()), 0.0);
  for (std::int64_t i = 0; i < mp.m; ++i)
    for (std::int64_t k = 0; k < mp.k; ++k)
      for (std::int64_t j = 0; j < mp.n; ++j) {
        da[i * mp.k + k] += dy[i * mp.n + j] * b.get(k * mp.n + j);
        db[k * mp.n + j] += a.get(i * mp.k + k) * dy[i * mp.n + j];
      }
  return r;
}

// max |got - ref| / max |ref| over a tensor: one number that is ~1e-7 for float32 FMA, ~1e-3 for
// TF32 and bfloat16, and O(1) for a layout mistake.
inline double relative_error(const Tensor& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  if (static_cast<std::size_t>(got.numel()) != ref.size()) return INFINITY;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    num = std::max(num, std::abs(got.get(static_cast<std::int64_t>(i)) - ref[i]));
    den = std::max(den, std::abs(ref[i]));
  }
  return den > 0 ? num / den : num;
}

}  // namespace validate::testing_gpu
