// conv_transpose2d: PyTorch's nn.functional.conv_transpose2d (input NCHW, weight IOHW =
// (in, out/groups, kh, kw), optional bias O), MSE loss, every gradient. Added as the proof that an
// op is one folder plus its registration (docs/architecture.md counts the files it took).
#include <algorithm>

#include <fmt/format.h>

#include "conv_transpose2d/reference.hpp"
#include "conv_like.hpp"
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
    auto keys = conv_like::case_keys();
    keys.insert("output_padding");
    return keys;
  }

  std::vector<NamedOrder> sum_orders() const override {
    return {{SumOrder::canonical, "c,kh,kw", "summed channel by channel, the kernel window innermost"},
            {SumOrder::channels_inner, "kh,kw,c", "summed over the kernel window with the channels innermost"}};
  }

  // The weight is IOHW: the output sums over its (i, kh, kw), grad_input over its (o, kh, kw);
  // grad_weight and grad_bias over dL/dy's (n, oh, ow), each dL/dy element meeting one input
  // element per tap.
  std::vector<Reduction> reductions() const override {
    return {{"output", "weight", {0, 2, 3}},
            {"grad_input", "weight", {1, 2, 3}},
            {"grad_weight", "dy", {0, 2, 3}},
            {"grad_bias", "dy", {0, 2, 3}}};
  }

  ElementOperands element_operands() const override { return conv_like::element_operands(); }

 protected:
  std::vector<TensorInfo> tensors_of(const ConvTransposeParams& p) const override {
    return conv_like::tensors(p, "IOHW", {p.c, p.o / p.groups, p.kh, p.kw});
  }

  std::int64_t reduction_length_of(const ConvTransposeParams& p) const override { return p.k(); }
  // col2im: (O kh kw) x (H W) per sample.
  std::int64_t scratch_elements_of(const ConvTransposeParams& p) const override {
    return p.n * p.o * p.kh * p.kw * p.h * p.w;
  }

  Status check_of(const ConvTransposeParams& c, const std::string& where) const override {
    auto bad = [&](const std::string& m) { return Status(Error{where + ": " + m}); };
    VALIDATE_TRY(conv_like::check_common(c, where));
    if (c.output_padding[0] < 0 || c.output_padding[1] < 0) return bad("output_padding must be >= 0");
    // PyTorch's rule: output_padding must be smaller than either stride or dilation.
    for (int a = 0; a < 2; ++a)
      if (c.output_padding[a] >= std::max(c.stride[a], c.dilation[a]))
        return bad(fmt::format("output_padding {} must be smaller than stride {} or dilation {}", c.output_padding[a],
                               c.stride[a], c.dilation[a]));
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
    VALIDATE_TRY(conv_like::apply_case_keys(j, c, where));
    return read_pair(j, "output_padding", c.output_padding, where);
  }

  std::string default_case_name_of(const ConvTransposeParams& c) const override {
    return fmt::format("ct_k{:04d}_ic{:03d}", c.k(), c.c);
  }

  Json expanded_case_of(const ConvTransposeParams& p) const override {
    Json j = conv_like::expanded_case(p);
    j["op"] = "conv_transpose2d";
    j["output_padding"] = {p.output_padding[0], p.output_padding[1]};
    return j;
  }

  Json metadata_params_of(const ConvTransposeParams& p) const override {
    Json j = conv_like::metadata_params(p);
    j["output_padding"] = {p.output_padding[0], p.output_padding[1]};
    return j;
  }

  Result<ConvTransposeParams> from_metadata_of(const Json& o, const std::string& where) const override {
    ConvTransposeParams cp;
    Status st;
    const auto w = conv_like::from_metadata(o, cp, "conv_transpose2d", where, st);
    VALIDATE_TRY(std::move(st));
    cp.output_padding = int_pair(o.at("params").at("output_padding"), "output_padding");
    // IOHW: o = (out/groups) * groups, with both factors checked before they are multiplied.
    if (cp.groups < 1 || cp.groups > kMaxExtent || w[1] < 1 || w[1] > kMaxExtent)
      return Error{where + ": conv_transpose2d groups and weight shape must be >= 1"};
    cp.o = w[1] * cp.groups;
    VALIDATE_TRY(check_of(cp, where + ": conv_transpose2d"));
    if (w[0] != cp.c) return Error{where + ": conv_transpose2d weight shape does not match input channels"};
    return cp;
  }

  Json exec_params_of(const ConvTransposeParams& p) const override {
    Json j = conv_like::exec_params(p);
    j["output_padding"] = {p.output_padding[0], p.output_padding[1]};
    return j;
  }

  std::vector<std::pair<const char*, std::int64_t>> exec_env_of(const ConvTransposeParams& p) const override {
    auto env = conv_like::exec_env(p);
    env.push_back({"VALIDATE_OPH", p.output_padding[0]});
    env.push_back({"VALIDATE_OPW", p.output_padding[1]});
    return env;
  }

  double reference_of(const ConvTransposeParams& p, const Views& v, const ReferenceOptions& opt) const override {
    return conv_transpose2d::reference(p, v, opt);
  }
  double output_element_of(const ConvTransposeParams& p, std::int64_t i, const ElementOperands& in,
                           const ElementOptions& opt) const override {
    return conv_transpose2d::output_element(p, i, in, opt);
  }
};

}  // namespace

const OpDef& conv_transpose2d_def() {
  static const ConvTranspose2d def;
  return def;
}

}  // namespace validate::ops
