#pragma once
// The oracle's arithmetic (private to oracle_*.cpp): float64 conv2d and matmul, forward and
// backward, on tensors that sit in a layout's memory order and are addressed by canonical index
// through per-axis strides (negative for a flipped axis, with the offset of element 0).
//
// Determinism: every output element is accumulated in one fixed canonical order — conv forward
// over (ci, kh, kw), dx over (o, kh, kw), dW per image over (oh, ow) and then over images, db
// over (n, oh, ow), matmul over k (Y), n (dA), m (dB) — independent of the layout and of the
// thread count. The arithmetic runs on contiguous staging copies read through the layout's
// strides, so the code path is the same for every layout and a correct layout gives bit-identical
// results.
#include <array>
#include <cstdint>
#include <vector>

#include "validate/cases/case.hpp"

namespace validate::runners::oracle {

// A float64 tensor in some layout's memory, addressed by canonical multi-index.
struct View {
  double* data = nullptr;
  std::int64_t offset = 0;
  std::array<std::int64_t, 4> stride{};  // per canonical axis, in elements; negative when flipped

  explicit operator bool() const { return data != nullptr; }
  double& at(std::int64_t i0) const { return data[offset + i0 * stride[0]]; }
  double& at(std::int64_t i0, std::int64_t i1) const {
    return data[offset + i0 * stride[0] + i1 * stride[1]];
  }
  double& at(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) const {
    return data[offset + i0 * stride[0] + i1 * stride[1] + i2 * stride[2] + i3 * stride[3]];
  }
};

// y = conv2d(x, w) + b (b may be empty). x NCHW, w OIHW, b O, y NCHW (canonical axes of the views).
void conv_forward(const cases::ConvParams& p, const View& x, const View& w, const View& b,
                  const View& y, int threads);
// From dy (canonical NCHW, contiguous): gx (may be empty), gw, gb (may be empty).
void conv_backward(const cases::ConvParams& p, const View& x, const View& w,
                   const std::vector<double>& dy, const View& gx, const View& gw, const View& gb,
                   int threads);

// Y[M,N] = A[M,K] B[K,N].
void matmul_forward(const cases::MatmulParams& p, const View& a, const View& b, const View& y,
                    int threads);
// From dY (canonical MN, contiguous): gA = dY B^T, gB = A^T dY.
void matmul_backward(const cases::MatmulParams& p, const View& a, const View& b,
                     const std::vector<double>& dy, const View& ga, const View& gb, int threads);

// mean((y' - t)^2) with y' = y rounded once to `output_dtype` (DESIGN.md's loss is taken on the
// output as the case's dtype holds it; float64 leaves y exact), summed in canonical order with
// Neumaier compensation; fills dy (canonical, contiguous) with dL/dy = 2 (y' - t) / numel.
double mse_conv(const cases::ConvParams& p, const View& y, const View& t, DType output_dtype,
                std::vector<double>& dy);
double mse_matmul(const cases::MatmulParams& p, const View& y, const View& t, DType output_dtype,
                  std::vector<double>& dy);

}  // namespace validate::runners::oracle
