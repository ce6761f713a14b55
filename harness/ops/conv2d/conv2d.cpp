// conv2d: PyTorch's nn.functional.conv2d (input NCHW, weight OIHW, optional bias O), MSE loss,
// every gradient. Everything the harness knows about conv2d is here and in ref_conv2d.cpp and
// conv2d_torch.cpp.
#include <fmt/format.h>

#include "conv2d/im2col.hpp"
#include "conv2d/reference.hpp"
#include "conv_like.hpp"
#include "validate/ops/params_json.hpp"
#include "validate/ops/registry.hpp"

namespace validate::ops {

namespace {

class Conv2d final : public OpDefFor<ConvParams> {
 public:
  const char* name() const override { return "conv2d"; }

  std::vector<std::pair<std::vector<const char*>, const char*>> preset(std::string_view preset) const override {
    if (preset == "channels_last")
      // torch.channels_last: activations NHWC and weights OHWI (cuDNN's NHWC filter format, KRSC).
      return {{{"input", "target", "output", "grad_input"}, "NHWC"}, {{"weight", "grad_weight"}, "OHWI"}};
    if (preset == "fortran")
      // A Fortran program's activations x(C,H,W,N): channel fastest, image slowest. In C terms the
      // bytes are NWHC — not NHWC: H and W trade places (cuDNN is given them through explicit
      // strides). Its kernel w(KW,KH,I,O) is byte for byte C-order OIHW (cuDNN's KCRS filter),
      // stored rotated by 180 degrees for CUDNN_CONVOLUTION mode; cuDNN returns dW for the buffer
      // it was given, so flipped too (docs/layouts.md derives it).
      return {{{"input", "target", "output", "grad_input"}, "CHWN:F"}, {{"weight", "grad_weight"}, "WHIO:F+flip=HW"}};
    return {};
  }

  std::set<std::string> case_keys() const override { return conv_like::case_keys(); }

  std::vector<NamedOrder> sum_orders() const override {
    return {{SumOrder::canonical, "c,kh,kw", "summed channel by channel, the kernel window innermost"},
            {SumOrder::channels_inner, "kh,kw,c", "summed over the kernel window with the channels innermost"}};
  }

  // The output sums over the weight's (c, kh, kw), grad_input over its (o, kh, kw); grad_weight and
  // grad_bias over dL/dy's (n, oh, ow), each dL/dy element meeting one input element per tap.
  std::vector<Reduction> reductions() const override {
    return {{"output", "weight", {1, 2, 3}},
            {"grad_input", "weight", {0, 2, 3}},
            {"grad_weight", "dy", {0, 2, 3}},
            {"grad_bias", "dy", {0, 2, 3}}};
  }

  ElementOperands element_operands() const override { return conv_like::element_operands(); }

 protected:
  std::vector<TensorInfo> tensors_of(const ConvParams& p) const override {
    return conv_like::tensors(p, "OIHW", {p.o, p.c / p.groups, p.kh, p.kw});
  }

  std::int64_t reduction_length_of(const ConvParams& p) const override { return p.k(); }
  // im2col: (C kh kw) x (Hout Wout) per sample.
  std::int64_t scratch_elements_of(const ConvParams& p) const override {
    return p.n * p.c * p.kh * p.kw * p.hout() * p.wout();
  }

  // Sizes, channels and kernel >= 1, stride and dilation >= 1, padding >= 0, groups dividing both
  // channel counts, a non-empty output, every value below 2^31 and every tensor (its im2col
  // matmul's included) below kMaxElements elements, so no shape product overflows int64.
  Status check_of(const ConvParams& c, const std::string& where) const override {
    VALIDATE_TRY(conv_like::check_common(c, where));
    // Every term is below 2^31 and dilation*(k-1) below 2^62: hout()/wout() cannot overflow now.
    if (c.hout() < 1 || c.wout() < 1)
      return Error{where + ": " + fmt::format("the kernel does not fit: output would be {}x{}", c.hout(), c.wout())};
    const std::int64_t hout = c.hout(), wout = c.wout();
    if (bounded_product({c.n, c.c, c.h, c.w}) < 0 || bounded_product({c.o, c.c / c.groups, c.kh, c.kw}) < 0 ||
        bounded_product({c.n, c.o, hout, wout}) < 0 || bounded_product({c.c / c.groups, c.kh, c.kw}) < 0 ||
        bounded_product({c.n, hout, wout}) < 0)
      return Error{where + ": a tensor of this geometry would have more than 2^36 elements"};
    return find(Op::matmul).check(im2col_gemm(c), where + " (its im2col matmul)");
  }

  Status apply_case_keys_of(const Json& j, ConvParams& c, const std::string& where) const override {
    return conv_like::apply_case_keys(j, c, where);
  }

  std::string default_case_name_of(const ConvParams& c) const override {
    return fmt::format("k{:04d}_ic{:03d}", c.k(), c.c);
  }

  Json expanded_case_of(const ConvParams& p) const override { return conv_like::expanded_case(p); }

  Json metadata_params_of(const ConvParams& p) const override { return conv_like::metadata_params(p); }

  Result<ConvParams> from_metadata_of(const Json& o, const std::string& where) const override {
    ConvParams cp;
    Status st;
    const auto w = conv_like::from_metadata(o, cp, "conv2d", where, st);
    VALIDATE_TRY(std::move(st));
    cp.o = w[0];  // OIHW
    // Before anything computes an output size: a stride of 0 divided by zero in hout().
    VALIDATE_TRY(check_of(cp, where + ": conv2d"));
    if (w[1] != cp.c / cp.groups) return Error{where + ": conv2d weight shape does not match input channels and groups"};
    return cp;
  }

  Json exec_params_of(const ConvParams& p) const override { return conv_like::exec_params(p); }

  std::vector<std::pair<const char*, std::int64_t>> exec_env_of(const ConvParams& p) const override {
    return conv_like::exec_env(p);
  }

  double reference_of(const ConvParams& p, const Views& v, const ReferenceOptions& opt) const override {
    return conv2d::reference(p, v, opt);
  }
  double output_element_of(const ConvParams& p, std::int64_t i, const ElementOperands& in,
                           const ElementOptions& opt) const override {
    return conv2d::output_element(p, i, in, opt);
  }
};

}  // namespace

const OpDef& conv2d_def() {
  static const Conv2d def;
  return def;
}

}  // namespace validate::ops
