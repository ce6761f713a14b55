// Output side: the program computed the right values but WROTE them in another layout than the
// one it declared. The run's tensor is put back into the declared layout's bytes (what the program
// wrote), and every other reading of those bytes is tried against the reference. Exact: no
// arithmetic, so a reading either reproduces the reference to the gate or it does not.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "diagnosis_internal.hpp"
#include "validate/layout/permute.hpp"

namespace validate::compare::detail {

namespace {

// idx: the positions unravelled (unravel_all).
Eval eval_sample(const DiagnosisInput& in, const ArrayView& bytes, const ElementTest& t,
                 const layout::Placement& m, const std::vector<std::int64_t>& positions,
                 const std::vector<std::int64_t>& idx) {
  Eval e;
  const std::size_t rank = in.shape.size();
  for (std::size_t k = 0; k < positions.size(); ++k) {
    const std::int64_t p = positions[k];
    e.add_at(p, read_value(in.ref, p), read_value(bytes, m.offset_of(idx.data() + k * rank)), t);
  }
  return e;
}

// Every element: validate::layout's permute engine gathers the bytes into canonical order a slab
// at a time (at most 16M elements in memory).
Eval eval_all(const DiagnosisInput& in, const ArrayView& bytes, const ElementTest& t,
              const layout::Placement& m) {
  Eval e;
  const layout::Gather g = layout::from_layout_gather(m);
  const std::vector<std::int64_t>& strides = g.src_strides;
  const std::int64_t offset = g.src_offset;
  const Shape inner(in.shape.begin() + 1, in.shape.end());
  const std::int64_t inner_n = std::max<std::int64_t>(1, shape_numel(inner));
  const std::int64_t rows = std::max<std::int64_t>(1, (std::int64_t{1} << 24) / inner_n);
  const std::size_t es = dtype_size(bytes.storage);
  std::vector<std::byte> buf(static_cast<std::size_t>(std::min(rows, in.shape[0]) * inner_n) * es);
  for (std::int64_t r0 = 0; r0 < in.shape[0]; r0 += rows) {
    const std::int64_t nr = std::min(rows, in.shape[0] - r0);
    Shape slab = inner;
    slab.insert(slab.begin(), nr);
    layout::permute_copy(bytes.data, buf.data(), es, slab, strides, offset + r0 * strides[0]);
    const ArrayView got{buf.data(), bytes.storage, nr * inner_n, false};
    for (std::int64_t j = 0; j < nr * inner_n; ++j)
      e.add_at(r0 * inner_n + j, read_value(in.ref, r0 * inner_n + j), read_value(got, j), t);
  }
  return e;
}

bool is_filter_descriptor(const DiagnosisInput& in, const Reading& rd, const layout::Placement& decl) {
  // cuDNN's filter descriptor (NCHW format) is C-order OIHW; in CUDNN_CONVOLUTION mode the values
  // are the flipped filter. A grad_weight in that layout while the program declared another one.
  if (in.axes != "OIHW" || in.tensor.rfind("grad", 0) != 0) return false;
  std::vector<int> id = {0, 1, 2, 3};
  return rd.m.memory_axes == id && decl.memory_axes != id;
}

void describe(const DiagnosisInput& in, const Reading& rd, const layout::Placement& decl,
              const std::string& declared, bool filter_desc, Hypothesis& h) {
  const std::string file = written_name(in);
  // A layout file declares what a program writes; a tensor compared in memory has no declaration
  // to change, so its advice is only the fix of the code that fills it.
  const auto or_declare = [&](const std::string& spec) {
    return in.in_memory ? std::string() : ", or declare it as " + spec;
  };
  // Words in the terms of the old single-tensor diagnosis (the GoogleTest matchers print them):
  // which axes moved relative to the declared order, or the Fortran reading, or the flips.
  std::vector<std::size_t> moved;
  for (std::size_t j = 0; j < rd.m.memory_axes.size(); ++j)
    if (rd.m.memory_axes[j] != decl.memory_axes[j]) moved.push_back(j);
  const std::string flipw = rd.flips.empty() ? "" : axis_words(rd.flips) + " flipped";
  const std::string bytes = in_notation_of(rd.spec, declared, in.axes);  // the declaration's notation
  const std::string spell = in_notation_of(rd.spec, declared, in.axes, false);
  std::string what;
  if (moved.empty())
    what = "with " + flipw;
  else if (rd.perm_code == "fortran_order")
    what = "read in Fortran (column-major) order" + (flipw.empty() ? "" : " with " + flipw);
  else if (rd.perm_code == "fortran_order+hw_swapped")
    what = "read in the opposite memory order with H and W exchanged (its bytes are " + bytes +
           ")" + (flipw.empty() ? "" : " and " + flipw);
  else if (moved.size() == 2)
    what = fmt::format("with {} and {} swapped (its bytes are {})",
                       in.axes[static_cast<std::size_t>(decl.memory_axes[moved[0]])],
                       in.axes[static_cast<std::size_t>(decl.memory_axes[moved[1]])], bytes) +
           (flipw.empty() ? "" : " and " + flipw);
  else
    what = "read as " + bytes + (flipw.empty() ? "" : " with " + flipw);
  if (declared != in.axes) what += " (declared " + declared + ")";
  h.description = what;
  if (filter_desc) {
    h.cause = "a weight gradient returned in the layout of cuDNN's filter descriptor (C-order OIHW" +
              std::string(rd.m.flipped[2] || rd.m.flipped[3]
                              ? ", flipped as CUDNN_CONVOLUTION mode returns it)"
                              : ")") +
              " instead of the declared " + declared;
    h.fix = "convert the gradient to " + declared + " before writing " + file +
            (in.in_memory ? "" : ", or declare grad_weight as " + spell + " in the layout file");
  } else if (rd.perm_code == "fortran_order") {
    h.cause = "a column-major (Fortran) array handed over as C order, or the reverse";
    h.fix = in.in_memory ? "transpose " + file + " into " + declared + " before comparing it"
                         : "declare " + in.tensor + " as " + spell + " or transpose it before writing " + file;
  } else if (rd.perm_code == "channels_order") {
    h.cause = "channels-first and channels-last confused (NCHW vs NHWC)";
    h.fix = "write " + file + " as " + declared + " (move the channel loop)" + or_declare(spell);
  } else if (rd.perm_code == "fortran_order+hw_swapped") {
    h.cause = "a column-major array handed over as C order (or the reverse) whose H and W loops "
              "were exchanged as well";
    h.fix = "write " + file + " as " + declared + ": check the memory order and the H/W loop order";
  } else if (rd.perm_code == "hw_swapped") {
    h.cause = in.shape.size() == 4 && in.shape[2] == in.shape[3]
                  ? "H and W exchanged, which the shape of a square tensor cannot show"
                  : "H and W exchanged in the loop that writes it";
    h.fix = "check the loop order (or the index expression) where you write " + file;
  } else if (rd.perm_code == "transposed") {
    h.cause = in.axes == "KN"   ? "a [K,N] matrix returned as [N,K] (a Linear weight's [out,in])"
              : in.axes == "MN" ? "the output written transposed"
                                : "a transposed matrix (the C-vs-Fortran order of a 2-D array)";
    h.fix = "write " + file + " as " + declared + or_declare(spell);
  } else if (!rd.perm_code.empty()) {
    h.cause = "the bytes are in " + bytes + " layout";
    h.fix = "write " + file + " as " + declared + or_declare(spell);
  } else {
    if (rd.flips == "HW" && in.axes == "OIHW")
      h.cause = in.tensor.rfind("grad", 0) == 0
                    ? "a weight gradient returned in the flipped filter layout of CUDNN_CONVOLUTION "
                      "mode"
                    : "a filter flipped for CUDNN_CONVOLUTION mode";
    else if (rd.flips == "HW")
      h.cause = "a spatial flip applied where none belongs";
    else
      h.cause = "a flip applied to one spatial axis";
    h.fix = "remove (or add) the flip of " + axis_words(rd.flips) + " where you write " + file +
            or_declare(spell);
  }
}

}  // namespace

void search_output_side(const DiagnosisInput& in, Search& s) {
  s.family("output_layout");
  const std::int64_t numel = shape_numel(in.shape);
  const ElementTest t = gate_test(in);
  const bool reshaped = in.run_shape != in.shape;
  // The bytes the program wrote: the run converted back into its declared layout. When the run's
  // shape is itself a permutation (a runner that did not convert), its bytes are taken as they are.
  const DeclaredBytes b =
      declared_bytes(in.run, in.shape, in.axes, reshaped ? std::string() : in.declared_layout);
  const std::string declared =
      reshaped || in.declared_layout.empty() ? in.axes : in.declared_layout;
  const auto positions = sample_positions(numel, in.sample);
  const auto idx = unravel_all(positions, in.shape);
  for (const Reading& rd : readings(in.shape, in.axes, b.declared,
                                          declared.find(":F") != std::string::npos)) {
    if (reshaped && rd.m.memory_shape != in.run_shape) continue;
    Hypothesis h;
    const bool fd = is_filter_descriptor(in, rd, b.declared);
    h.code = fd ? "filter_descriptor_layout"
                : rd.perm_code.empty()
                    ? "flipped"
                    : rd.perm_code + (rd.flips.empty() ? "" : "+flipped");
    h.tensor = in.tensor;
    h.side = "output";
    h.family = "output_layout";
    h.spec = rd.spec;
    h.rank = rd.rank;
    h.params = {{"declared", declared}, {"bytes", rd.spec}};
    if (!rd.flips.empty()) h.params["flipped"] = rd.flips;
    Eval e = eval_sample(in, b.view, t, rd.m, positions, idx);
    if (e.beyond == 0) {
      // Confirm beyond the sample: every element, or a 1M sample for huge tensors.
      if (numel <= in.confirm_all_limit) {
        e = eval_all(in, b.view, t, rd.m);
      } else {
        const auto more = sample_positions(numel, 1 << 20);
        e = eval_sample(in, b.view, t, rd.m, more, unravel_all(more, in.shape));
      }
      h.confirmed_all = numel <= in.confirm_all_limit;
    }
    h.max_abs = e.max_abs;
    h.beyond = e.beyond;
    h.checked = e.checked;
    h.passes = e.beyond == 0;
    describe(in, rd, b.declared, declared, fd, h);
    add_aliases(rd, h);
    s.add(std::move(h));
  }
}

}  // namespace validate::compare::detail
