#pragma once
// Shared by the runner tests: cases whose every axis has a different size, seeded inputs in the
// storage dtype of a case, and OpTasks over them.
#include <cstdint>
#include <map>
#include <random>
#include <string>

#include "validate/cases/case.hpp"
#include "validate/core/tensor.hpp"
#include "validate/backends/runner.hpp"

namespace validate::testing {

inline cases::Case conv_case(const std::string& name, const cases::ConvParams& p, DType dtype) {
  cases::Case c;
  c.name = name;
  c.dtype = dtype;
  c.params<cases::ConvParams>() = p;
  c.params<cases::MatmulParams>() = cases::im2col_gemm(p);
  return c;
}

inline cases::Case matmul_case(const std::string& name, std::int64_t m, std::int64_t k,
                               std::int64_t n, DType dtype) {
  cases::Case c;
  c.name = name;
  c.dtype = dtype;
  c.params<cases::MatmulParams>() = {m, k, n};
  return c;
}

inline cases::ConvParams conv_params(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                                     std::int64_t o, std::int64_t kh, std::int64_t kw,
                                     std::array<std::int64_t, 2> stride,
                                     std::array<std::int64_t, 2> padding,
                                     std::array<std::int64_t, 2> dilation, std::int64_t groups,
                                     bool bias) {
  cases::ConvParams p;
  p.n = n, p.c = c, p.h = h, p.w = w, p.o = o, p.kh = kh, p.kw = kw;
  p.stride = stride, p.padding = padding, p.dilation = dilation, p.groups = groups, p.bias = bias;
  return p;
}

// The inputs of a case and op: uniform in [-1, 1) (scaled per tensor), rounded to the case's
// logical dtype and stored in its storage dtype, as a reference set holds them.
struct Inputs {
  std::map<std::string, Tensor> owned;
  std::map<std::string, const Tensor*> view() const {
    std::map<std::string, const Tensor*> m;
    for (const auto& [k, v] : owned) m[k] = &v;
    return m;
  }
};

inline Inputs make_inputs(const cases::Case& c, cases::Op op, std::uint64_t seed) {
  Inputs in;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const DType storage = storage_dtype(c.dtype);
  for (const auto& t : c.inputs(op)) {
    Tensor x(storage, t.shape);
    const float scale = t.name == "bias" ? 0.25f : 1.0f;
    for (std::int64_t i = 0; i < x.numel(); ++i) x.set(i, round_to_dtype(scale * u(rng), c.dtype));
    in.owned.emplace(t.name, std::move(x));
  }
  return in;
}

inline runners::OpTask make_task(const cases::Case& c, cases::Op op, const Inputs& in,
                                 const std::string& work_dir = {}) {
  runners::OpTask task;
  task.c = &c;
  task.op = op;
  task.inputs = in.view();
  task.work_dir = work_dir;
  return task;
}

}  // namespace validate::testing
