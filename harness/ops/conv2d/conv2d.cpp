// conv2d: PyTorch's nn.functional.conv2d (input NCHW, weight OIHW, optional bias O), MSE loss,
// every gradient. Everything the harness knows about conv2d is here and in ref_conv2d.cpp and
// conv2d_torch.cpp.
#include <fmt/format.h>

#include "conv2d/im2col.hpp"
#include "conv2d/reference.hpp"
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

  std::set<std::string> case_keys() const override {
    return {"batch", "in_channels", "height", "width", "out_channels", "kernel", "padding", "stride", "dilation", "groups", "bias"};
  }

 protected:
  std::vector<TensorInfo> tensors_of(const ConvParams& p) const override {
    std::vector<TensorInfo> t;
    Shape act_in{p.n, p.c, p.h, p.w}, act_out{p.n, p.o, p.hout(), p.wout()};
    Shape wshape{p.o, p.c / p.groups, p.kh, p.kw};
    t.push_back({"input", Role::input, "NCHW", act_in});
    t.push_back({"weight", Role::input, "OIHW", wshape});
    if (p.bias) t.push_back({"bias", Role::input, "O", {p.o}});
    t.push_back({"target", Role::input, "NCHW", act_out});
    t.push_back({"output", Role::output, "NCHW", act_out});
    t.push_back({"loss", Role::loss, "", {}});
    t.push_back({"grad_input", Role::grad, "NCHW", act_in});
    t.push_back({"grad_weight", Role::grad, "OIHW", wshape});
    if (p.bias) t.push_back({"grad_bias", Role::grad, "O", {p.o}});
    return t;
  }

  std::int64_t reduction_length_of(const ConvParams& p) const override { return p.k(); }

  // Sizes, channels and kernel >= 1, stride and dilation >= 1, padding >= 0, groups dividing both
  // channel counts, a non-empty output, every value below 2^31 and every tensor (its im2col
  // matmul's included) below kMaxElements elements, so no shape product overflows int64.
  Status check_of(const ConvParams& c, const std::string& where) const override {
    auto bad = [&](const std::string& m) { return Status(Error{where + ": " + m}); };
    if (c.n < 1 || c.c < 1 || c.h < 1 || c.w < 1 || c.o < 1 || c.kh < 1 || c.kw < 1)
      return bad("batch, channels, sizes and kernel must be >= 1");
    if (c.stride[0] < 1 || c.stride[1] < 1 || c.dilation[0] < 1 || c.dilation[1] < 1)
      return bad("stride and dilation must be >= 1");
    if (c.padding[0] < 0 || c.padding[1] < 0) return bad("padding must be >= 0");
    for (auto v : {c.n, c.c, c.h, c.w, c.o, c.kh, c.kw, c.stride[0], c.stride[1], c.padding[0], c.padding[1],
                   c.dilation[0], c.dilation[1], c.groups})
      if (v > kMaxExtent) return bad(fmt::format("{} is too large (sizes, channels and parameters must be < 2^31)", v));
    if (c.groups < 1 || c.c % c.groups || c.o % c.groups)
      return bad(fmt::format("groups={} must divide in_channels={} and out_channels={}", c.groups, c.c, c.o));
    // Every term is below 2^31 and dilation*(k-1) below 2^62: hout()/wout() cannot overflow now.
    if (c.hout() < 1 || c.wout() < 1)
      return bad(fmt::format("the kernel does not fit: output would be {}x{}", c.hout(), c.wout()));
    const std::int64_t hout = c.hout(), wout = c.wout();
    if (bounded_product({c.n, c.c, c.h, c.w}) < 0 || bounded_product({c.o, c.c / c.groups, c.kh, c.kw}) < 0 ||
        bounded_product({c.n, c.o, hout, wout}) < 0 || bounded_product({c.c / c.groups, c.kh, c.kw}) < 0 ||
        bounded_product({c.n, hout, wout}) < 0)
      return bad(fmt::format("a tensor of this geometry would have more than 2^36 elements"));
    return find(Op::matmul).check(im2col_gemm(c), where + " (its im2col matmul)");
  }

  Status apply_case_keys_of(const Json& j, ConvParams& c, const std::string& where) const override {
    VALIDATE_TRY(read_int(j, "batch", c.n, where));
    VALIDATE_TRY(read_int(j, "in_channels", c.c, where));
    VALIDATE_TRY(read_int(j, "height", c.h, where));
    VALIDATE_TRY(read_int(j, "width", c.w, where));
    VALIDATE_TRY(read_int(j, "out_channels", c.o, where));
    VALIDATE_TRY(read_int(j, "groups", c.groups, where));
    std::array<std::int64_t, 2> k{c.kh, c.kw};
    VALIDATE_TRY(read_pair(j, "kernel", k, where));
    c.kh = k[0];
    c.kw = k[1];
    VALIDATE_TRY(read_pair(j, "padding", c.padding, where));
    VALIDATE_TRY(read_pair(j, "stride", c.stride, where));
    VALIDATE_TRY(read_pair(j, "dilation", c.dilation, where));
    return read_bool(j, "bias", c.bias, where);
  }

  std::string default_case_name_of(const ConvParams& c) const override {
    return fmt::format("k{:04d}_ic{:03d}", c.k(), c.c);
  }

  Json expanded_case_of(const ConvParams& p) const override {
    return {{"batch", p.n}, {"in_channels", p.c}, {"height", p.h}, {"width", p.w}, {"out_channels", p.o},
            {"kernel", {p.kh, p.kw}}, {"stride", {p.stride[0], p.stride[1]}}, {"padding", {p.padding[0], p.padding[1]}},
            {"dilation", {p.dilation[0], p.dilation[1]}}, {"groups", p.groups}, {"bias", p.bias}, {"K", p.k()}};
  }

  Json metadata_params_of(const ConvParams& p) const override {
    return {{"stride", {p.stride[0], p.stride[1]}},
            {"padding", {p.padding[0], p.padding[1]}},
            {"dilation", {p.dilation[0], p.dilation[1]}},
            {"groups", p.groups},
            {"bias", p.bias}};
  }

  Result<ConvParams> from_metadata_of(const Json& o, const std::string& where) const override {
    const Json& p = o.at("params");
    auto in = int_list(o.at("tensors").at("input").at("shape"), 0, "conv2d input shape");
    auto w = int_list(o.at("tensors").at("weight").at("shape"), 0, "conv2d weight shape");
    if (in.size() != 4 || w.size() != 4) return Error{where + ": conv2d input and weight must be 4-D"};
    ConvParams cp;
    cp.n = in[0]; cp.c = in[1]; cp.h = in[2]; cp.w = in[3];
    cp.o = w[0]; cp.kh = w[2]; cp.kw = w[3];
    cp.stride = int_pair(p.at("stride"), "stride");
    cp.padding = int_pair(p.at("padding"), "padding");
    cp.dilation = int_pair(p.at("dilation"), "dilation");
    cp.groups = int_value(p.at("groups"), "groups");
    cp.bias = p.at("bias").get<bool>();
    // Before anything computes an output size: a stride of 0 divided by zero in hout().
    VALIDATE_TRY(check_of(cp, where + ": conv2d"));
    if (w[1] != cp.c / cp.groups) return Error{where + ": conv2d weight shape does not match input channels and groups"};
    return cp;
  }

  Json exec_params_of(const ConvParams& p) const override {
    return {{"N", p.n}, {"C", p.c}, {"H", p.h}, {"W", p.w}, {"O", p.o}, {"KH", p.kh}, {"KW", p.kw},
            {"stride", {p.stride[0], p.stride[1]}}, {"padding", {p.padding[0], p.padding[1]}},
            {"dilation", {p.dilation[0], p.dilation[1]}}, {"groups", p.groups}, {"bias", p.bias},
            {"Hout", p.hout()}, {"Wout", p.wout()}};
  }

  std::vector<std::pair<const char*, std::int64_t>> exec_env_of(const ConvParams& p) const override {
    return {{"VALIDATE_N", p.n},           {"VALIDATE_C", p.c},           {"VALIDATE_H", p.h},
            {"VALIDATE_W", p.w},           {"VALIDATE_O", p.o},           {"VALIDATE_KH", p.kh},
            {"VALIDATE_KW", p.kw},         {"VALIDATE_SH", p.stride[0]},  {"VALIDATE_SW", p.stride[1]},
            {"VALIDATE_PH", p.padding[0]}, {"VALIDATE_PW", p.padding[1]}, {"VALIDATE_DH", p.dilation[0]},
            {"VALIDATE_DW", p.dilation[1]}, {"VALIDATE_GROUPS", p.groups}, {"VALIDATE_HOUT", p.hout()},
            {"VALIDATE_WOUT", p.wout()},   {"VALIDATE_BIAS", p.bias ? 1 : 0}};
  }

  double reference_of(const ConvParams& p, const Views& v, const ReferenceOptions& opt) const override {
    return conv2d::reference(p, v, opt);
  }
};

}  // namespace

const OpDef& conv2d_def() {
  static const Conv2d def;
  return def;
}

}  // namespace validate::ops
