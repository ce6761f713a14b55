#include "validate/ops/registry.hpp"

#include <cassert>
#include <type_traits>
#include <utility>

namespace validate::ops {

// Each op's definition, in its folder.
const OpDef& conv2d_def();
const OpDef& matmul_def();
const OpDef& conv_transpose2d_def();

const std::vector<const OpDef*>& registry() {
  // Registration (2 of 2): one line per op, in Op order (find() indexes by it).
  static const std::vector<const OpDef*> ops = {&conv2d_def(), &matmul_def(), &conv_transpose2d_def()};
  return ops;
}

const OpDef& find(Op op) {
  const auto& ops = registry();
  const auto i = static_cast<std::size_t>(op);
  assert(i < ops.size() && ops[i]->id() == op);
  return *ops[i];
}

const OpDef* find(std::string_view name) {
  for (const OpDef* d : registry())
    if (name == d->name()) return d;
  return nullptr;
}

namespace {
template <class T, class = void>
struct has_bias : std::false_type {};
template <class T>
struct has_bias<T, std::void_t<decltype(std::declval<T&>().bias)>> : std::true_type {};
}  // namespace

OpParams with_all_tensors(const OpDef& def) {
  OpParams p = def.default_params();
  std::visit([](auto& params) {
    if constexpr (has_bias<std::decay_t<decltype(params)>>::value) params.bias = true;
  }, p);
  return p;
}

const char* op_name(Op op) { return find(op).name(); }

const char* role_name(Role r) {
  switch (r) {
    case Role::input: return "input";
    case Role::output: return "output";
    case Role::loss: return "loss";
    case Role::grad: return "grad";
    case Role::loss_curve: return "loss_curve";
    case Role::checkpoint: return "checkpoint";
  }
  return "?";
}

const std::vector<Role>& all_roles() {
  static const std::vector<Role> roles = {Role::input, Role::output,     Role::loss,
                                          Role::grad,  Role::loss_curve, Role::checkpoint};
  return roles;
}

std::optional<Role> role_from_name(std::string_view name) {
  for (Role r : all_roles())
    if (name == role_name(r)) return r;
  return std::nullopt;
}

}  // namespace validate::ops
