#pragma once
// Shared by the gpu tests: the device check every device test starts with, and a float64 CPU
// reference of conv2d and matmul (forward, MSE loss, gradients) written from the definitions, so
// the cuDNN runner is held to the math rather than to another library.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "validate/cases/case.hpp"
#include "validate/ops/registry.hpp"
#include "validate/core/rng.hpp"
#include "validate/core/tensor.hpp"
#include "validate/gpu/device.hpp"

// Skips the test (reported by ctest as skipped) when no CUDA device can be opened.
#define VALIDATE_REQUIRE_GPU()                                             \
  do {                                                                     \
    if (::validate::Status _st = ::validate::gpu::require_device(0); !_st) \
      GTEST_SKIP() << _st.message(); /* "no usable CUDA device: <why>" */ \
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
    const float scale = t.name == "weight" ? 1.f / std::sqrt(static_cast<float>(c.params<cases::ConvParams>().k()))
                        : t.name == "bias" ? 0.1f
                                           : 1.f;
    in.emplace(t.name, random_tensor(t.shape, c.dtype, "conv_" + t.name, scale));
  }
  return in;
}

inline Tensors matmul_inputs(const cases::Case& c) {
  Tensors in;
  for (const auto& t : c.inputs(cases::Op::matmul)) {
    const float scale = t.name == "B" ? 1.f / std::sqrt(static_cast<float>(c.params<cases::MatmulParams>().k)) : 1.f;
    in.emplace(t.name, random_tensor(t.shape, c.dtype, "mm_" + t.name, scale));
  }
  return in;
}

// float64 results, canonical layout (output, loss, every gradient): the op's own float64
// reference (harness/ops/<op>/, itself tested against LibTorch in float64), the loss taken on the
// output rounded to the case dtype, as the device stores it.
inline std::map<std::string, std::vector<double>> op_reference(const cases::Case& c, cases::Op op,
                                                               const Tensors& in) {
  std::map<std::string, std::vector<double>> mem;
  ops::Views views;
  const auto table = c.tensors(op);
  for (const auto& t : table) {
    auto& v = mem[t.name];
    v.assign(static_cast<std::size_t>(shape_numel(t.shape)), 0.0);
    if (t.role == cases::Role::input)
      for (std::int64_t i = 0; i < shape_numel(t.shape); ++i) v[static_cast<std::size_t>(i)] = in.at(t.name).get(i);
  }
  for (const auto& t : table) {
    if (t.role == cases::Role::loss) continue;
    views[t.name] = ops::dense_view(mem[t.name], t.shape);
  }
  ops::ReferenceOptions opt;
  opt.threads = 4;
  opt.loss_on = c.dtype;
  const double loss = ops::find(op).reference(c.find(op)->params, views, opt);
  std::map<std::string, std::vector<double>> r;
  for (const auto& t : table)
    if (t.role != cases::Role::input) r[t.name] = t.role == cases::Role::loss ? std::vector<double>{loss} : mem[t.name];
  return r;
}

inline std::map<std::string, std::vector<double>> conv_reference(const cases::Case& c, const Tensors& in) {
  return op_reference(c, cases::Op::conv2d, in);
}

inline std::map<std::string, std::vector<double>> matmul_reference(const cases::Case& c, const Tensors& in) {
  return op_reference(c, cases::Op::matmul, in);
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
