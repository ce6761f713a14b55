#pragma once
// What the two convolution-like input searches (diagnosis_conv_recompute.cpp,
// diagnosis_conv_transpose_recompute.cpp) start from, built once: the op's per-element recompute
// (its bias fixed), the sampled output positions and the element test, and the input and weight
// bytes as the layout file declares them — the readings each search then tries are its own.
#include <optional>
#include <string>
#include <vector>

#include "diagnosis_internal.hpp"
#include "diagnosis_operand.hpp"

namespace validate::compare::detail {

struct ConvLikeSearch {
  const DiagnosisInput& in;
  Search& s;
  ElementRecompute R;
  Shape xs, ws;                        // input (NCHW) and weight shapes
  std::int64_t numel;
  ElementTest t;
  std::vector<std::int64_t> positions;
  std::string dx_decl, dw_decl;        // the declared layouts' names ("NCHW", "WHIO:F+flip=HW")
  DeclaredBytes xb, wb;
  Operand x0, w0;                      // the input and the weight read as declared
  std::optional<DeclaredRecompute> declared;  // the op on x0, w0 (and the bias)

  // `w_axes`: the weight's canonical axes (OIHW for conv2d, IOHW for conv_transpose2d). The caller
  // has checked that the parameters describe the output (make_params).
  template <class P>
  ConvLikeSearch(const DiagnosisInput& in_, Search& s_, const P& p, const std::string& w_axes)
      : in(in_),
        s(s_),
        R(ops::op_of<P>(), p),
        xs(in_.input_shapes.at("input")),
        ws(in_.input_shapes.at("weight")),
        numel(shape_numel(in_.shape)),
        t(recompute_test(in_)),
        positions(sample_positions(numel, in_.recompute_sample)),
        dx_decl(declared_name(in_, "input", "NCHW")),
        dw_decl(declared_name(in_, "weight", w_axes)),
        xb(declared_bytes(in_.inputs.at("input"), xs, "NCHW", dx_decl == "NCHW" ? "" : dx_decl)),
        wb(declared_bytes(in_.inputs.at("weight"), ws, w_axes, dw_decl == w_axes ? "" : dw_decl)),
        x0{xb.view, xb.declared},
        w0{wb.view, wb.declared} {
    if (p.bias) R.fixed["bias"] = contiguous_operand(in_.inputs.at("bias"));
    declared.emplace(in_, [this, xw = R.with("input", x0, "weight", w0)](std::int64_t q) {
      return R.at(q, xw, recompute_options());
    });
  }
  ConvLikeSearch(const ConvLikeSearch&) = delete;  // x0/w0 point into xb/wb

  // Recomputes the sampled positions with the input and weight read as x and w (the bias times
  // bias_scale: 0 lost, 2 doubled) and adds h, judged by the element test.
  void run(Hypothesis h, Operand x, Operand w, double bias_scale) {
    const ops::ElementOperands xw = R.with("input", x, "weight", w);
    const ops::ElementOptions opt = recompute_options(bias_scale);
    const Eval e = eval_recompute(in, t, positions, [&](std::int64_t p) { return R.at(p, xw, opt); });
    finish_recompute(h, e, numel);
    if (h.passes && declared->coincides(positions.size(), [&](std::size_t k) {
          return Predicted{positions[k], R.at(positions[k], xw, opt)};
        }))
      return s.coincident(std::move(h));
    s.add(std::move(h));
  }
};

}  // namespace validate::compare::detail
