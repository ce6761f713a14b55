// conv_transpose2d: PyTorch's nn.functional.conv_transpose2d (input NCHW, weight IOHW =
// (in, out/groups, kh, kw), optional bias O), MSE loss, every gradient. Added as the proof that an
// op is one folder plus its registration (docs/architecture.md counts the files it took).
#include <algorithm>

#include <fmt/format.h>

#include "conv_transpose2d/reference.hpp"
#include "validate/ops/params_json.hpp"
#include "validate/ops/registry.hpp"

namespace validate::ops {

namespace {

class ConvTranspose2d final : public OpDefFor<ConvTransposeParams> {
 public:
  const char* name() const override { return "conv_transpose2d"; }

  std::vector<std::pair<std::vector<const char*>, const char*>> preset(std::string_view preset) const override {
    if (preset == "channels_last")
      // torch.channels_last on a (in, out/g, kh, kw) weight keeps axis 0 outermost: IHWO.
      return {{{"input", "target", "output", "grad_input"}, "NHWC"}, {{"weight", "grad_weight"}, "IHWO"}};
    if (preset == "fortran")
      // x(C,H,W,N) as for conv2d; the weight w(KW,KH,O,I) is byte for byte C-order IOHW.
      return {{{"input", "target", "output", "grad_input"}, "CHWN:F"}, {{"weight", "grad_weight"}, "WHOI:F"}};
    return {};
  }

  std::set<std::string> case_keys() const override {
    return {"batch", "in_channels", "height", "width", "out_channels", "kernel", "padding", "output_padding", "stride", "dilation", "groups", "bias"};
  }

 protected:
  std::vector<TensorInfo> tensors_of(const ConvTransposeParams& p) const override {
    std::vector<TensorInfo> t;
    Shape act_in{p.n, p.c, p.h, p.w}, act_out{p.n, p.o, p.hout(), p.wout()};
    Shape wshape{p.c, p.o / p.groups, p.kh, p.kw};
    t.push_back({"input", Role::input, "NCHW", act_in});
    t.push_back({"weight", Role::input, "IOHW", wshape});
    if (p.bias) t.push_back({"bias", Role::input, "O", {p.o}});
    t.push_back({"target", Role::input, "NCHW", act_out});
    t.push_back({"output", Role::output, "NCHW", act_out});
    t.push_back({"loss", Role::loss, "", {}});
    t.push_back({"grad_input", Role::grad, "NCHW", act_in});
    t.push_back({"grad_weight", Role::grad, "IOHW", wshape});
    if (p.bias) t.push_back({"grad_bias", Role::grad, "O", {p.o}});
    return t;
  }

  std::int64_t reduction_length_of(const ConvTransposeParams& p) const override { return p.k(); }

  Status check_of(const ConvTransposeParams& c, const std::string& where) const override {
    auto bad = [&](const std::string& m) { return Status(Error{where + ": " + m}); };
    if (c.n < 1 || c.c < 1 || c.h < 1 || c.w < 1 || c.o < 1 || c.kh < 1 || c.kw < 1)
      return bad("batch, channels, sizes and kernel must be >= 1");
    if (c.stride[0] < 1 || c.stride[1] < 1 || c.dilation[0] < 1 || c.dilation[1] < 1)
      return bad("stride and dilation must be >= 1");
    if (c.padding[0] < 0 || c.padding[1] < 0 || c.output_padding[0] < 0 || c.output_padding[1] < 0)
      return bad("padding and output_padding must be >= 0");
    for (auto v : {c.n, c.c, c.h, c.w, c.o, c.kh, c.kw, c.stride[0], c.stride[1], c.padding[0], c.padding[1],
                   c.dilation[0], c.dilation[1], c.groups})
      if (v > kMaxExtent) return bad(fmt::format("{} is too large (sizes, channels and parameters must be < 2^31)", v));
    // PyTorch's rule: output_padding must be smaller than either stride or dilation.
    for (int a = 0; a < 2; ++a)
      if (c.output_padding[a] >= std::max(c.stride[a], c.dilation[a]))
        return bad(fmt::format("output_padding {} must be smaller than stride {} or dilation {}", c.output_padding[a],
                               c.stride[a], c.dilation[a]));
    if (c.groups < 1 || c.c % c.groups || c.o % c.groups)
      return bad(fmt::format("groups={} must divide in_channels={} and out_channels={}", c.groups, c.c, c.o));
    if (c.h > kMaxExtent / c.stride[0] || c.w > kMaxExtent / c.stride[1])
      return bad("the output would be too large (sizes times stride must be < 2^31)");
    if (c.hout() < 1 || c.wout() < 1)
      return bad(fmt::format("the padding leaves no output: output would be {}x{}", c.hout(), c.wout()));
    if (c.hout() > kMaxExtent || c.wout() > kMaxExtent) return bad("the output would be too large");
    if (bounded_product({c.n, c.c, c.h, c.w}) < 0 || bounded_product({c.c, c.o / c.groups, c.kh, c.kw}) < 0 ||
        bounded_product({c.n, c.o, c.hout(), c.wout()}) < 0)
      return bad("a tensor of this geometry would have more than 2^36 elements");
    return Status::ok();
  }

  Status apply_case_keys_of(const Json& j, ConvTransposeParams& c, const std::string& where) const override {
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
    VALIDATE_TRY(read_pair(j, "output_padding", c.output_padding, where));
    VALIDATE_TRY(read_pair(j, "stride", c.stride, where));
    VALIDATE_TRY(read_pair(j, "dilation", c.dilation, where));
    return read_bool(j, "bias", c.bias, where);
  }

  std::string default_case_name_of(const ConvTransposeParams& c) const override {
    return fmt::format("ct_k{:04d}_ic{:03d}", c.k(), c.c);
  }

  Json expanded_case_of(const ConvTransposeParams& p) const override {
    return {{"op", "conv_transpose2d"}, {"batch", p.n}, {"in_channels", p.c}, {"height", p.h}, {"width", p.w},
            {"out_channels", p.o}, {"kernel", {p.kh, p.kw}}, {"stride", {p.stride[0], p.stride[1]}},
            {"padding", {p.padding[0], p.padding[1]}}, {"output_padding", {p.output_padding[0], p.output_padding[1]}},
            {"dilation", {p.dilation[0], p.dilation[1]}}, {"groups", p.groups}, {"bias", p.bias}, {"K", p.k()}};
  }

  Json metadata_params_of(const ConvTransposeParams& p) const override {
    return {{"stride", {p.stride[0], p.stride[1]}},
            {"padding", {p.padding[0], p.padding[1]}},
            {"output_padding", {p.output_padding[0], p.output_padding[1]}},
            {"dilation", {p.dilation[0], p.dilation[1]}},
            {"groups", p.groups},
            {"bias", p.bias}};
  }

  Result<ConvTransposeParams> from_metadata_of(const Json& o, const std::string& where) const override {
    const Json& p = o.at("params");
    auto in = int_list(o.at("tensors").at("input").at("shape"), 0, "conv_transpose2d input shape");
    auto w = int_list(o.at("tensors").at("weight").at("shape"), 0, "conv_transpose2d weight shape");
    if (in.size() != 4 || w.size() != 4) return Error{where + ": conv_transpose2d input and weight must be 4-D"};
    ConvTransposeParams cp;
    cp.n = in[0]; cp.c = in[1]; cp.h = in[2]; cp.w = in[3];
    cp.kh = w[2]; cp.kw = w[3];
    cp.stride = int_pair(p.at("stride"), "stride");
    cp.padding = int_pair(p.at("padding"), "padding");
    cp.output_padding = int_pair(p.at("output_padding"), "output_padding");
    cp.dilation = int_pair(p.at("dilation"), "dilation");
    cp.groups = int_value(p.at("groups"), "groups");
    cp.bias = p.at("bias").get<bool>();
    if (cp.groups < 1 || cp.groups > kMaxExtent || w[1] < 1 || w[1] > kMaxExtent)
      return Error{where + ": conv_transpose2d groups and weight shape must be >= 1"};
    cp.o = w[1] * cp.groups;
    VALIDATE_TRY(check_of(cp, where + ": conv_transpose2d"));
    if (w[0] != cp.c) return Error{where + ": conv_transpose2d weight shape does not match input channels"};
    return cp;
  }

  Json exec_params_of(const ConvTransposeParams& p) const override {
    return {{"N", p.n}, {"C", p.c}, {"H", p.h}, {"W", p.w}, {"O", p.o}, {"KH", p.kh}, {"KW", p.kw},
            {"stride", {p.stride[0], p.stride[1]}}, {"padding", {p.padding[0], p.padding[1]}},
            {"output_padding", {p.output_padding[0], p.output_padding[1]}},
            {"dilation", {p.dilation[0], p.dilation[1]}}, {"groups", p.groups}, {"bias", p.bias},
            {"Hout", p.hout()}, {"Wout", p.wout()}};
  }

  std::vector<std::pair<const char*, std::int64_t>> exec_env_of(const ConvTransposeParams& p) const override {
    return {{"VALIDATE_N", p.n},           {"VALIDATE_C", p.c},           {"VALIDATE_H", p.h},
            {"VALIDATE_W", p.w},           {"VALIDATE_O", p.o},           {"VALIDATE_KH", p.kh},
            {"VALIDATE_KW", p.kw},         {"VALIDATE_SH", p.stride[0]},  {"VALIDATE_SW", p.stride[1]},
            {"VALIDATE_PH", p.padding[0]}, {"VALIDATE_PW", p.padding[1]}, {"VALIDATE_OPH", p.output_padding[0]},
            {"VALIDATE_OPW", p.output_padding[1]}, {"VALIDATE_DH", p.dilation[0]}, {"VALIDATE_DW", p.dilation[1]},
            {"VALIDATE_GROUPS", p.groups}, {"VALIDATE_HOUT", p.hout()},   {"VALIDATE_WOUT", p.wout()},
            {"VALIDATE_BIAS", p.bias ? 1 : 0}};
  }

  double reference_of(const ConvTransposeParams& p, const Views& v, const ReferenceOptions& opt) const override {
    return conv_transpose2d::reference(p, v, opt);
  }
};

}  // namespace

const OpDef& conv_transpose2d_def() {
  static const ConvTranspose2d def;
  return def;
}

}  // namespace validate::ops
