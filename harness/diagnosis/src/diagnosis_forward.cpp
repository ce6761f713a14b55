// The diagnosis's whole-output float64 forward: the op's own reference (harness/ops/<op>/), on
// the canonical reference inputs widened to float64. One implementation per op, shared with the
// oracle, instead of a naive copy per op here.
#include <map>

#include "diagnosis_internal.hpp"
#include "validate/ops/registry.hpp"

namespace validate::compare::detail {

ops::Accumulation accumulation_of(Rounding r) {
  switch (r) {
    case Rounding::float32: return ops::Accumulation::float32;
    case Rounding::bfloat16: return ops::Accumulation::bfloat16;
    case Rounding::float16: return ops::Accumulation::float16;
    default: return ops::Accumulation::float64;  // none; tf32 is an operand rounding, not an accumulator
  }
}

bool forward_all(const DiagnosisInput& in, const Shape& out_shape, std::vector<double>& y,
                 const ops::ReferenceOptions& opt) {
  if (!in.params) return false;
  const ops::OpDef& def = ops::find(ops::op_of(*in.params));
  if (in.op != def.id()) return false;
  const auto table = def.tensors(*in.params);
  std::map<std::string, std::vector<double>> mem;
  ops::Views views;
  for (const auto& t : table) {
    if (t.role == ops::Role::output) {
      if (t.shape != out_shape) return false;
      if (shape_numel(out_shape) * def.reduction_length(*in.params) > in.full_forward_budget) return false;
      y.assign(static_cast<std::size_t>(shape_numel(out_shape)), 0.0);
      views[t.name] = ops::dense_view(y, t.shape);
    }
    if (t.role != ops::Role::input) continue;  // no gradient views: the reference skips them
    auto it = in.inputs.find(t.name);
    if (it == in.inputs.end() || it->second.numel != shape_numel(t.shape)) return false;
    auto& v = mem[t.name];
    v.resize(static_cast<std::size_t>(it->second.numel));
    for (std::int64_t i = 0; i < it->second.numel; ++i) v[static_cast<std::size_t>(i)] = read_value(it->second, i);
    views[t.name] = ops::dense_view(v, t.shape);
  }
  (void)def.reference(*in.params, views, opt);  // the loss against the reference target is not needed here
  return true;
}

}  // namespace validate::compare::detail
