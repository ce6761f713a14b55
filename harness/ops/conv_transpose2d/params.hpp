#pragma once
// conv_transpose2d's problem descriptor: PyTorch's nn.functional.conv_transpose2d geometry. The
// input is NCHW with C = in_channels; the weight is (in, out/groups, kh, kw) — axes "IOHW", the
// transpose of conv2d's OIHW, which is the classic porting mistake (docs/architecture.md).
#include <array>
#include <cstdint>

namespace validate::ops {

struct ConvTransposeParams {
  std::int64_t n = 1, c = 8, h = 8, w = 8;  // input NCHW (c = in_channels)
  std::int64_t o = 8, kh = 3, kw = 3;       // o = out_channels; weight (c, o / groups, kh, kw)
  std::array<std::int64_t, 2> stride{1, 1}, padding{0, 0}, output_padding{0, 0}, dilation{1, 1};
  std::int64_t groups = 1;
  bool bias = true;

  // PyTorch: (H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1.
  std::int64_t hout() const { return (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1; }
  std::int64_t wout() const { return (w - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1; }
  // Terms summed into one output element at most (its adjoint conv2d's reduction length).
  std::int64_t k() const { return (c / groups) * kh * kw; }
};

}  // namespace validate::ops
