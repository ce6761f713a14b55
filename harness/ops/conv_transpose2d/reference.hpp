#pragma once
// conv_transpose2d's float64 reference on strided views: x NCHW (C = in), w IOHW
// (in, out/groups, kh, kw), b O, y NCHW. y[n, o, ih*s - p + kh*d, iw*s - p + kw*d] gets
// x[n, c, ih, iw] * w[c, o - g*Og, kh, kw] for c in o's group g: the adjoint of conv2d.
#include <vector>

#include "conv_transpose2d/params.hpp"
#include "validate/ops/element.hpp"
#include "validate/ops/reference.hpp"

namespace validate::ops::conv_transpose2d {

// Canonical order of every sum, whatever the layout and thread count: y over (ci, kh, kw) and then
// the bias; dx over (o, kh, kw); dW over (n, ih, iw); db over (n, oh, ow). The running sum is
// rounded as opt.accumulation says after every add; the forward follows opt.order (channels_inner:
// kh, kw, ci) and opt.bias_first.
void forward(const ConvTransposeParams& p, const View& x, const View& w, const View& b, const View& y,
             const ReferenceOptions& opt);
void backward(const ConvTransposeParams& p, const View& x, const View& w, const std::vector<double>& dy,
              const View& gx, const View& gw, const View& gb, Accumulation acc, int threads);

double reference(const ConvTransposeParams& p, const Views& v, const ReferenceOptions& opt);

// One output element at flat canonical index i, read in place through `in` (element_conv_transpose2d.cpp;
// OpDef::output_element).
double output_element(const ConvTransposeParams& p, std::int64_t i, const ElementOperands& in, const ElementOptions& opt);

}  // namespace validate::ops::conv_transpose2d
