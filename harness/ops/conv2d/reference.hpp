#pragma once
// conv2d's float64 reference (forward, backward) on strided views; x NCHW, w OIHW, b O, y NCHW.
#include <vector>

#include "conv2d/params.hpp"
#include "validate/ops/element.hpp"
#include "validate/ops/reference.hpp"

namespace validate::ops::conv2d {

// y = conv2d(x, w) + b (b may be empty).
void conv_forward(const ConvParams& p, const View& x, const View& w, const View& b, const View& y, int threads);
// From dy (canonical NCHW, contiguous): gx (may be empty), gw, gb (may be empty).
void conv_backward(const ConvParams& p, const View& x, const View& w, const std::vector<double>& dy,
                   const View& gx, const View& gw, const View& gb, int threads);

// The same sums, one element at a time in the canonical order (forward over ci, kh, kw, then the
// bias; dx over o, kh, kw; dW over n, oh, ow; db over n, oh, ow), the running sum rounded as `acc`
// says after every add. The forward follows opt.order (channels_inner: kh, kw, ci) and
// opt.bias_first. Single-threaded: it is the diagnosis's recompute, not the oracle's path.
void conv_forward_acc(const ConvParams& p, const View& x, const View& w, const View& b, const View& y,
                      const ReferenceOptions& opt);
void conv_backward_acc(const ConvParams& p, const View& x, const View& w, const std::vector<double>& dy,
                       const View& gx, const View& gw, const View& gb, Accumulation acc);

// Forward, MSE loss against "target", backward, on the views named by conv2d's tensor table.
double reference(const ConvParams& p, const Views& v, const ReferenceOptions& opt);

// One output element at flat canonical index i, read in place through `in` (element_conv2d.cpp;
// OpDef::output_element).
double output_element(const ConvParams& p, std::int64_t i, const ElementOperands& in, const ElementOptions& opt);

}  // namespace validate::ops::conv2d
