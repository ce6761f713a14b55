#include "validate/cases/case.hpp"

#include <algorithm>

#include <limits>
#include <regex>

#include <fmt/format.h>

namespace validate::cases {

const char* op_name(Op op) { return op == Op::conv2d ? "conv2d" : "matmul"; }

std::optional<Op> op_from_name(const std::string& name) {
  for (Op op : kAllOps)
    if (name == op_name(op)) return op;
  return std::nullopt;
}

const char* role_name(Role r) {
  switch (r) {
    case Role::input: return "input";
    case Role::output: return "output";
    case Role::loss: return "loss";
    case Role::grad: return "grad";
  }
  return "?";
}

MatmulParams im2col_gemm(const ConvParams& c) {
  return MatmulParams{c.n * c.hout() * c.wout(), c.k(), c.o};
}

std::string default_case_name(const ConvParams& c) {
  return fmt::format("k{:04d}_ic{:03d}", c.k(), c.c);
}

namespace {

constexpr std::int64_t kMaxExtent = std::numeric_limits<std::int32_t>::max();

// Product of positive factors, or -1 once it passes kMaxElements or would overflow.
std::int64_t bounded_product(std::initializer_list<std::int64_t> factors) {
  std::int64_t p = 1;
  for (auto f : factors)
    if (__builtin_mul_overflow(p, f, &p) || p > kMaxElements) return -1;
  return p;
}

}  // namespace

Status check_conv(const ConvParams& c, const std::string& where) {
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
  return check_matmul(im2col_gemm(c), where + " (its im2col matmul)");
}

Status check_matmul(const MatmulParams& m, const std::string& where) {
  if (m.m < 1 || m.k < 1 || m.n < 1 || m.m > kMaxElements || m.k > kMaxExtent || m.n > kMaxExtent)
    return Error{fmt::format("{}: matmul M={} K={} N={} must be >= 1 (and K, N < 2^31)", where, m.m, m.k, m.n)};
  if (bounded_product({m.m, m.k}) < 0 || bounded_product({m.k, m.n}) < 0 || bounded_product({m.m, m.n}) < 0)
    return Error{fmt::format("{}: matmul M={} K={} N={} has a tensor of more than 2^36 elements", where, m.m, m.k, m.n)};
  return Status::ok();
}

Status check_case_name(const std::string& name, const std::string& where) {
  static const std::regex ok("^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$");
  if (!std::regex_match(name, ok))
    return Error{where + ": case name '" + name + "' must be letters, digits, '_', '-', '.' (no paths)"};
  return Status::ok();
}

std::vector<TensorInfo> Case::tensors(Op op) const {
  std::vector<TensorInfo> t;
  if (op == Op::conv2d) {
    const auto& p = conv;
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
  } else {
    const auto& p = matmul;
    t.push_back({"A", Role::input, "MK", {p.m, p.k}});
    t.push_back({"B", Role::input, "KN", {p.k, p.n}});
    t.push_back({"target", Role::input, "MN", {p.m, p.n}});
    t.push_back({"output", Role::output, "MN", {p.m, p.n}});
    t.push_back({"loss", Role::loss, "", {}});
    t.push_back({"grad_A", Role::grad, "MK", {p.m, p.k}});
    t.push_back({"grad_B", Role::grad, "KN", {p.k, p.n}});
  }
  return t;
}

const std::vector<std::string>& all_tensor_names() {
  static const std::vector<std::string> names = [] {
    Case c;
    c.conv.bias = true;  // the full table, grad_bias included
    std::vector<std::string> out;
    for (Op op : {Op::conv2d, Op::matmul})
      for (const auto& t : c.tensors(op))
        if (std::find(out.begin(), out.end(), t.name) == out.end()) out.push_back(t.name);
    return out;
  }();
  return names;
}

std::vector<TensorInfo> Case::inputs(Op op) const {
  std::vector<TensorInfo> r;
  for (auto& t : tensors(op))
    if (t.role == Role::input) r.push_back(t);
  return r;
}

std::vector<TensorInfo> Case::produced(Op op) const {
  std::vector<TensorInfo> r;
  for (auto& t : tensors(op))
    if (t.role != Role::input) r.push_back(t);
  return r;
}

std::string Case::file_name(Op op, const std::string& tensor) const {
  return fmt::format("{}_{}_{}.npy", name, op_name(op), tensor);
}

}  // namespace validate::cases
