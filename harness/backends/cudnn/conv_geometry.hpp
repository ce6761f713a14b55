#pragma once
// The convolution problem cuDNN is given for conv2d and for conv_transpose2d, in plain C++ (no
// CUDA or cuDNN header) so that tests/gpu checks it without a device.
//
// conv_transpose2d is the adjoint of conv2d, and cuDNN has no transposed convolution: as PyTorch
// does, its forward is cudnnConvolutionBackwardData of the conv2d whose *output* is the transposed
// convolution's input. In cuDNN's terms the problem is one convolution X -(W)-> Y with
//   conv2d:           X = the op's input,  Y = the op's output, W = OIHW  [o, c/g, kh, kw]
//   conv_transpose2d: X = the op's output, Y = the op's input,  W = IOHW  [c, o/g, kh, kw]
// (an IOHW weight is exactly cuDNN's KCRS filter with K = the transposed convolution's input
// channels), and the three calls produce
//   conv2d:           Forward -> output,     BackwardData -> grad_input, BackwardFilter ->
//   grad_weight conv_transpose2d: BackwardData -> output, Forward -> grad_input,     BackwardFilter
//   -> grad_weight
// with BackwardFilter reading X = grad_output and dY = the op's input for the transposed op.
#include <array>
#include <cstdint>
#include <string>

#include "algo_select.hpp"
#include "conv_transpose2d/params.hpp"
#include "validate/cases/case.hpp"
#include "validate/core/tensor.hpp"
#include "validate/layout/spec.hpp"

namespace validate::runners::cudnn_detail {

struct ConvGeometry {
  bool transposed = false;
  std::string op = "conv2d";         // the layout set's op name
  std::string weight_axes = "OIHW";  // canonical axes of weight and grad_weight
  Shape x, w, y;                     // the op's input, weight and output (canonical)
  std::int64_t channels_out = 0;     // the op's output channels: the bias length
  bool bias = false;
  std::array<std::int64_t, 2> padding{0, 0}, stride{1, 1}, dilation{1, 1};
  std::int64_t groups = 1;

  // cuDNN's convolution X -> Y (header comment).
  const Shape& cudnn_x() const { return transposed ? y : x; }
  const Shape& cudnn_y() const { return transposed ? x : y; }
};

// The fields both ops fill alike from their parameters (input, output and the convolution's
// geometry); the weight's shape and axes are each op's own.
template <class P>
ConvGeometry conv_geometry_common(const P& p) {
  ConvGeometry g;
  g.x = {p.n, p.c, p.h, p.w};
  g.y = {p.n, p.o, p.hout(), p.wout()};
  g.channels_out = p.o;
  g.bias = p.bias;
  g.padding = p.padding;
  g.stride = p.stride;
  g.dilation = p.dilation;
  g.groups = p.groups;
  return g;
}

inline ConvGeometry conv_geometry(const ops::ConvParams& p) {
  ConvGeometry g = conv_geometry_common(p);
  g.w = {p.o, p.c / p.groups, p.kh, p.kw};
  return g;
}

inline ConvGeometry conv_geometry(const ops::ConvTransposeParams& p) {
  ConvGeometry g = conv_geometry_common(p);
  g.transposed = true;
  g.op = "conv_transpose2d";
  g.weight_axes = "IOHW";
  g.w = {p.c, p.o / p.groups, p.kh, p.kw};
  return g;
}

// What cudnnGetConvolution2dForwardOutputDim computes for input x and filter w (cuDNN's
// documented formula): conv2d's output shape, and for the transposed op its input shape — the
// check that the descriptors describe the case (output_padding < stride is what the floor
// division absorbs).
inline Shape cudnn_forward_dims(const ConvGeometry& g, const Shape& x, const Shape& w) {
  auto out = [&](int a) {
    const std::int64_t in = x[static_cast<std::size_t>(2 + a)],
                       k = w[static_cast<std::size_t>(2 + a)];
    return (in + 2 * g.padding[static_cast<std::size_t>(a)] -
            g.dilation[static_cast<std::size_t>(a)] * (k - 1) - 1) /
               g.stride[static_cast<std::size_t>(a)] +
           1;
  };
  return {x[0], w[0], out(0), out(1)};
}

// The op tensor a cuDNN direction produces.
inline const char* produced_tensor(Direction d, bool transposed) {
  switch (d) {
    case Direction::fwd:
      return transposed ? "grad_input" : "output";
    case Direction::bwd_data:
      return transposed ? "output" : "grad_input";
    case Direction::bwd_filter:
      return "grad_weight";
  }
  return "?";
}

// A cuDNN direction's two activation operands, named by the op tensor whose descriptor and buffer
// each is, in the order the call takes them (Forward: x, y; BackwardData: dy, dx; BackwardFilter:
// x, dy). "grad_output" shares the output's descriptor.
inline std::array<const char*, 2> operand_tensors(Direction d, bool transposed) {
  switch (d) {
    case Direction::fwd:
      if (transposed) return {"grad_output", "grad_input"};
      return {"input", "output"};
    case Direction::bwd_data:
      if (transposed) return {"input", "output"};
      return {"grad_output", "grad_input"};
    case Direction::bwd_filter:
      break;
  }
  if (transposed) return {"grad_output", "input"};
  return {"input", "grad_output"};
}

// The order of one pass: the direction that produces the output runs first (the loss needs it),
// then the one producing grad_input, then the filter gradient.
inline std::array<Direction, 3> execution_order(bool transposed) {
  if (transposed) return {Direction::bwd_data, Direction::fwd, Direction::bwd_filter};
  return {Direction::fwd, Direction::bwd_data, Direction::bwd_filter};
}

// CUDNN_CONVOLUTION (true) or CUDNN_CROSS_CORRELATION for a weight stored as `weight`: a kernel
// flipped in H and W is stored for the true convolution, one flipped in neither for the
// cross-correlation PyTorch computes; one flipped in H or W alone is neither (an error naming it).
// conv2d's mode is resolve_conv_mode's (it also weighs --conv-mode); conv_transpose2d takes this.
inline Result<bool> convolution_mode_of(const layout::Spec& weight) {
  const bool h = weight.flip.find('H') != std::string::npos;
  const bool w = weight.flip.find('W') != std::string::npos;
  if (h != w)
    return Error{"weight " + layout::to_string(weight) + " is flipped in " + (h ? "H" : "W") +
                 " only; cuDNN reads a filter as stored (cross-correlation) or rotated by 180 "
                 "degrees in H and W (convolution)"};
  return h;
}

}  // namespace validate::runners::cudnn_detail
