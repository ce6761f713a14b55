// What the diagnosis is given: the run's declared layouts and the op's reference tensors.
#include "comparer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <type_traits>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "validate/metrics/ulp.hpp"

#include "validate/core/fs.hpp"
#include "validate/ops/registry.hpp"

namespace validate::compare::detail {

namespace stdfs = std::filesystem;

Diagnosis Comparer::run_diagnosis(const PairItem& it, const Entry& e, const Mapped& ref,
                                  const Mapped& run, const Gates& gt, double floor,
                                  const ScaleFile* scale, bool rounding_sized) {
  DiagnosisInput in;
  in.rounding_sized = rounding_sized;
  in.ref = ref.view();
  in.run = run.view();
  in.shape = e.shape;
  in.run_shape = run.header.shape;
  in.axes = e.axes;
  in.op = *it.op;
  in.tensor = it.tensor;
  in.role = e.role;
  in.logical = it.ref->c.dtype;
  in.atol = gt.atol;
  in.rtol = gt.rtol;
  if (gt.max_ulp) in.max_ulp = ulp_limit(*gt.max_ulp);
  // The gate's per-element bound: the hypotheses are held to what the gate holds the run to,
  // with the gradient's stored dL/dy choice where the gate used it.
  std::optional<ScaleFile> choice;
  ArrayView choice_view;
  if (scale && gt.bound && e.role)
    if (auto o = scale_bound_options(it, e, *scale, gt)) {
      in.bound = DiagnosisInput::ElementBound{scale->map.view(), *o};
      if (e.bound_used_choice)
        if (auto ch = open_choice(it, e.op_name(), it.tensor, e.shape, *e.role); ch && *ch) {
          choice = std::move(**ch);
          choice_view = choice->map.view();
          set_stored_term(*e.role, choice_view, choice->unit, in.bound->options);
        }
    }
  if (floor <= 0) {  // shape mismatch: no metric pass ran
    const RefScan sc = scan_reference(in.ref, in.logical, opt_.threads);
    floor = std::max(gt.near_zero * sc.max_abs, 1e-30);
  }
  in.floor = floor;
  declared_layouts(it, in);
  // Reference tensors of the op, for recomputing with an operand misread.
  std::vector<Mapped> keep;
  add_reference_tensors(it, in, keep);
  // The oracle's values (three-way mode): the profile measures the run's own error against them.
  std::optional<Mapped> exact;
  if (auto o = open_oracle(it, e); o && *o && (**o).view().numel == in.ref.numel) {
    exact = std::move(**o);
    in.exact = exact->view(false);
  }
  return diagnose(in);
}

// The layouts the run declared for every tensor of the op (what the program was handed / wrote).

void Comparer::declared_layouts(const PairItem& it, DiagnosisInput& in) {
  if (!it.run) return;
  const cases::OpRunRecord* o = it.run->op(*it.op);
  if (!o || !o->layouts) return;
  in.declared = *o->layouts;
  auto l = o->layouts->find(it.tensor);
  if (l != o->layouts->end()) in.declared_layout = l->second;
}

// The op's reference inputs (target included), its reference output and geometry.

void Comparer::add_reference_tensors(const PairItem& it, DiagnosisInput& in,
                                     std::vector<Mapped>& keep) {
  keep.reserve(8);
  const cases::Op op = *it.op;
  for (const auto& t : it.ref->c.tensors(op)) {
    if (t.name != "output" && t.role != cases::Role::input) continue;
    auto m = open_npy((stdfs::path(it.ref->dtype_dir) / it.ref->c.file_name(op, t.name)).string());
    if (!m || m->header.shape != t.shape) continue;
    keep.push_back(std::move(*m));
    in.inputs[t.name] = keep.back().view();
    in.input_shapes[t.name] = t.shape;
  }
  // The convolution geometry of a conv-like op (the recompute families read it).
  const cases::OpInstance* inst = it.ref->c.find(op);
  if (!inst) return;
  in.params = inst->params;
  std::visit(
      [&](const auto& p) {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, cases::ConvParams> ||
                      std::is_same_v<P, cases::ConvTransposeParams>) {
          in.conv.stride[0] = p.stride[0];
          in.conv.stride[1] = p.stride[1];
          in.conv.padding[0] = p.padding[0];
          in.conv.padding[1] = p.padding[1];
          in.conv.dilation[0] = p.dilation[0];
          in.conv.dilation[1] = p.dilation[1];
          in.conv.groups = p.groups;
          in.conv.bias = p.bias;
        }
      },
      inst->params);
}

}  // namespace validate::compare::detail
