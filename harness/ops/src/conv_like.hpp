#pragma once
// What conv2d and conv_transpose2d share (private to their <op>.cpp): the geometry fields both
// parameter structs have (n, c, h, w, o, kh, kw, stride, padding, dilation, groups, bias), their
// tensor table around a weight of the op's own axes, the case-file keys, the common checks and the
// exec/metadata spellings. Each op adds what is its own (output_padding, the weight's order).
#include <array>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "validate/ops/element.hpp"
#include "validate/ops/op.hpp"
#include "validate/ops/params_json.hpp"

namespace validate::ops::conv_like {

// input NCHW, weight `waxes` of `wshape`, optional bias O, target/output NCHW, loss, grads.
template <class P>
std::vector<TensorInfo> tensors(const P& p, const char* waxes, const Shape& wshape) {
  std::vector<TensorInfo> t;
  Shape act_in{p.n, p.c, p.h, p.w}, act_out{p.n, p.o, p.hout(), p.wout()};
  t.push_back({"input", Role::input, "NCHW", act_in});
  t.push_back({"weight", Role::input, waxes, wshape, true});
  if (p.bias) t.push_back({"bias", Role::input, "O", {p.o}, true});
  t.push_back({"target", Role::input, "NCHW", act_out});
  t.push_back({"output", Role::output, "NCHW", act_out});
  t.push_back({"loss", Role::loss, "", {}});
  t.push_back({"grad_input", Role::grad, "NCHW", act_in});
  t.push_back({"grad_weight", Role::grad, waxes, wshape});
  if (p.bias) t.push_back({"grad_bias", Role::grad, "O", {p.o}});
  return t;
}

// The operand slots of a convolution's element path (OpDef::element_operands).
inline ElementOperands element_operands() {
  ElementOperands e;
  e.name = {"input", "weight", "bias", nullptr};
  return e;
}

inline std::set<std::string> case_keys() {
  return {"batch", "in_channels", "height", "width", "out_channels", "kernel", "padding", "stride", "dilation",
          "groups", "bias"};
}

template <class P>
Status apply_case_keys(const Json& j, P& c, const std::string& where) {
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

// Sizes, channels and kernel >= 1, stride and dilation >= 1, padding >= 0, every value below 2^31,
// groups dividing both channel counts: before anything computes an output size.
template <class P>
Status check_common(const P& c, const std::string& where) {
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
  return Status::ok();
}

template <class P>
Json expanded_case(const P& p) {
  return {{"batch", p.n}, {"in_channels", p.c}, {"height", p.h}, {"width", p.w}, {"out_channels", p.o},
          {"kernel", {p.kh, p.kw}}, {"stride", {p.stride[0], p.stride[1]}}, {"padding", {p.padding[0], p.padding[1]}},
          {"dilation", {p.dilation[0], p.dilation[1]}}, {"groups", p.groups}, {"bias", p.bias}, {"K", p.k()}};
}

template <class P>
Json metadata_params(const P& p) {
  return {{"stride", {p.stride[0], p.stride[1]}},
          {"padding", {p.padding[0], p.padding[1]}},
          {"dilation", {p.dilation[0], p.dilation[1]}},
          {"groups", p.groups},
          {"bias", p.bias}};
}

// ops.<op>: input shape [n, c, h, w], the weight's 4 sizes, and the common params; the caller
// derives o and the kernel from the weight in its own axis order.
template <class P>
std::vector<std::int64_t> from_metadata(const Json& o, P& cp, const char* op, const std::string& where, Status& st) {
  const Json& p = o.at("params");
  auto in = int_list(o.at("tensors").at("input").at("shape"), 0, (std::string(op) + " input shape").c_str());
  auto w = int_list(o.at("tensors").at("weight").at("shape"), 0, (std::string(op) + " weight shape").c_str());
  if (in.size() != 4 || w.size() != 4) {
    st = Error{where + ": " + op + " input and weight must be 4-D"};
    return {};
  }
  cp.n = in[0], cp.c = in[1], cp.h = in[2], cp.w = in[3];
  cp.kh = w[2], cp.kw = w[3];
  cp.stride = int_pair(p.at("stride"), "stride");
  cp.padding = int_pair(p.at("padding"), "padding");
  cp.dilation = int_pair(p.at("dilation"), "dilation");
  cp.groups = int_value(p.at("groups"), "groups");
  cp.bias = p.at("bias").get<bool>();
  st = Status::ok();
  return w;
}

template <class P>
Json exec_params(const P& p) {
  return {{"N", p.n}, {"C", p.c}, {"H", p.h}, {"W", p.w}, {"O", p.o}, {"KH", p.kh}, {"KW", p.kw},
          {"stride", {p.stride[0], p.stride[1]}}, {"padding", {p.padding[0], p.padding[1]}},
          {"dilation", {p.dilation[0], p.dilation[1]}}, {"groups", p.groups}, {"bias", p.bias},
          {"Hout", p.hout()}, {"Wout", p.wout()}};
}

template <class P>
std::vector<std::pair<const char*, std::int64_t>> exec_env(const P& p) {
  return {{"VALIDATE_N", p.n},           {"VALIDATE_C", p.c},           {"VALIDATE_H", p.h},
          {"VALIDATE_W", p.w},           {"VALIDATE_O", p.o},           {"VALIDATE_KH", p.kh},
          {"VALIDATE_KW", p.kw},         {"VALIDATE_SH", p.stride[0]},  {"VALIDATE_SW", p.stride[1]},
          {"VALIDATE_PH", p.padding[0]}, {"VALIDATE_PW", p.padding[1]}, {"VALIDATE_DH", p.dilation[0]},
          {"VALIDATE_DW", p.dilation[1]}, {"VALIDATE_GROUPS", p.groups}, {"VALIDATE_HOUT", p.hout()},
          {"VALIDATE_WOUT", p.wout()},   {"VALIDATE_BIAS", p.bias ? 1 : 0}};
}

}  // namespace validate::ops::conv_like
