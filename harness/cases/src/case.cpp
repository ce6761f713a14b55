#include "validate/cases/case.hpp"

#include <fmt/format.h>

namespace validate::cases {

const char* op_name(Op op) { return op == Op::conv2d ? "conv2d" : "matmul"; }

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
