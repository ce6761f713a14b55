#pragma once
// conv2d's problem descriptor: PyTorch's nn.functional.conv2d geometry (input NCHW, weight OIHW).
#include <array>
#include <cstdint>

namespace validate::ops {

struct ConvParams {
  std::int64_t n = 1, c = 8, h = 32, w = 32;  // input NCHW
  std::int64_t o = 32, kh = 3, kw = 3;        // weight OIHW (I = c / groups)
  std::array<std::int64_t, 2> stride{1, 1}, padding{1, 1}, dilation{1, 1};
  std::int64_t groups = 1;
  bool bias = true;

  std::int64_t hout() const { return (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) / stride[0] + 1; }
  std::int64_t wout() const { return (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) / stride[1] + 1; }
  std::int64_t k() const { return (c / groups) * kh * kw; }  // reduction length per output
};

}  // namespace validate::ops
