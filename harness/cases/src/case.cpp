#include "validate/cases/case.hpp"

#include <algorithm>
#include <cassert>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "validate/core/suggest.hpp"
#include "validate/ops/registry.hpp"
#include "validate/train/tensor_names.hpp"

namespace validate::cases {

std::string default_case_name(const ConvParams& c) { return ops::find(Op::conv2d).default_case_name(c); }

Status check_conv(const ConvParams& c, const std::string& where) { return ops::find(Op::conv2d).check(c, where); }
Status check_matmul(const MatmulParams& m, const std::string& where) { return ops::find(Op::matmul).check(m, where); }
Status check_op(const OpInstance& op, const std::string& where) { return ops::find(op.op()).check(op.params, where); }

Status check_case_name(const std::string& name, const std::string& where) {
  static const std::regex ok("^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$");
  if (!std::regex_match(name, ok))
    return Error{where + ": case name '" + name + "' must be letters, digits, '_', '-', '.' (no paths)"};
  return Status::ok();
}

const InputDist* Case::input_dist(Op op, const std::string& tensor) const {
  auto it = input_dists.find(std::string(op_name(op)) + "." + tensor);
  if (it == input_dists.end()) it = input_dists.find(tensor);
  return it == input_dists.end() ? nullptr : &it->second;
}

bool Case::has_user_tensor(Op op) const {
  for (const auto& t : inputs(op))
    if (const InputDist* d = input_dist(op, t.name); d && d->dist == Dist::npy) return true;
  return false;
}

Status check_input_dists(const Case& c, const std::string& where) {
  std::vector<std::string> names;
  for (const OpInstance& inst : c.ops)
    for (const auto& t : c.inputs(inst.op()))
      for (std::string n : {t.name, std::string(op_name(inst.op())) + "." + t.name})
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  for (const auto& [key, d] : c.input_dists) {
    if (std::find(names.begin(), names.end(), key) == names.end())
      return Error{fmt::format("{}: inputs: '{}' is not an input of case '{}' (its inputs: {}){}", where, key, c.name,
                               fmt::join(names, ", "), did_you_mean(key, names))};
    if (!c.train || d.dist != Dist::npy) continue;
    for (const OpInstance& inst : c.ops)
      for (const auto& t : c.inputs(inst.op())) {
        if (t.parameter || c.input_dist(inst.op(), t.name) != &d) continue;
        std::vector<std::string> params;
        for (const auto& p : c.parameters(inst.op())) params.push_back(p.name);
        return Error{fmt::format("{}: inputs.{}: a training case draws a new '{}' for every step, so it cannot come "
                                 "from a file (\"npy\" is for the parameters, which the optimizer carries from "
                                 "step 0: {})",
                                 where, key, t.name, fmt::join(params, ", "))};
      }
  }
  return Status::ok();
}

const OpInstance* Case::find(Op op) const {
  for (const auto& o : ops)
    if (o.op() == op) return &o;
  return nullptr;
}

const OpInstance& Case::find_asserted(Op op) const {
  const OpInstance* o = find(op);
  assert(o && "the case has no such op");
  return *o;
}

void Case::drop(Op op) {
  ops.erase(std::remove_if(ops.begin(), ops.end(), [&](const OpInstance& o) { return o.op() == op; }), ops.end());
}

Case Case::conv_with_im2col(std::string name, const ConvParams& conv) {
  Case c;
  c.name = std::move(name);
  c.ops = {OpInstance{conv}, OpInstance{im2col_gemm(conv)}};
  return c;
}

std::vector<TensorInfo> Case::tensors(Op op) const {
  const OpInstance* o = find(op);
  if (!o) return {};
  std::vector<TensorInfo> all = ops::find(op).tensors(o->params);
  if (!train) return all;
  std::vector<TensorInfo> params;
  for (const auto& t : all)
    if (t.parameter) params.push_back(t);
  all.push_back({train::kLossCurve, Role::loss_curve, "S", {train->steps}});
  for (std::int64_t k : train::checkpoint_steps(*train)) {
    for (const auto& p : params) all.push_back({train::checkpoint_tensor(k, p.name), Role::checkpoint, p.canonical_axes, p.shape});
    for (const auto& p : params)
      all.push_back({train::checkpoint_tensor(k, "grad_" + p.name), Role::checkpoint, p.canonical_axes, p.shape});
  }
  return all;
}

bool Case::master_copy(Role role, const std::string& name) {
  if (role != Role::checkpoint) return false;
  const auto cp = train::parse_checkpoint_tensor(name);
  return cp && cp->tensor.rfind("grad_", 0) != 0;
}

bool Case::has_bound_scale(const TensorInfo& t) const {
  if (t.role == Role::output || t.role == Role::grad) return true;
  return t.role == Role::checkpoint && train && train->optimizer == train::Optimizer::sgd;
}

DType Case::storage(const TensorInfo& t) const {
  if (t.role == Role::loss || t.role == Role::loss_curve || master_copy(t.role, t.name)) return DType::float32;
  return storage_dtype(dtype);
}

std::vector<TensorInfo> Case::parameters(Op op) const {
  std::vector<TensorInfo> r;
  for (auto& t : tensors(op))
    if (t.parameter) r.push_back(t);
  return r;
}

const std::vector<std::string>& all_tensor_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const ops::OpDef* d : ops::registry()) {
      for (const auto& t : d->tensors(ops::with_all_tensors(*d)))
        if (std::find(out.begin(), out.end(), t.name) == out.end()) out.push_back(t.name);
    }
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
