// Input side, conv2d: the program READ its inputs wrongly (or did the arithmetic differently), so
// its output is not a re-arrangement of the right one. Each hypothesis recomputes the output with
// a float64 oracle at sampled positions, from the reference inputs as the program would have seen
// them: the bytes it was handed (the inputs in their declared layouts) read in another layout,
// flipped, rounded, or with the bias lost or doubled. Output positions only: a few hundred of them
// cost K multiply-adds each, so a failing ic=8192 tensor is diagnosed in well under a second.
#include <cmath>

#include <fmt/format.h>

#include "diagnosis_internal.hpp"
#include "diagnosis_operand.hpp"
#include "validate/ops/registry.hpp"

namespace validate::compare::detail {

namespace {

struct ConvProblem {
  Shape xs, ws, os;
  ConvGeometry g;
  bool bias = false;
  ArrayView b;
  // The float64 output at a flat canonical output index. `acc` other than none: the running sum
  // (started at the bias) rounded to it after every add, in the order (c, kh, kw) or, with
  // `channels_inner`, (kh, kw, c) (a channels-last loop nest): accumulation in a narrow type.
  double at(std::int64_t i, const Operand& x, const Operand& w, double bias_scale,
            Rounding acc = Rounding::none, bool channels_inner = false) const {
    const std::int64_t ow = i % os[3], oh = (i / os[3]) % os[2], o = (i / (os[3] * os[2])) % os[1],
                       n = i / (os[3] * os[2] * os[1]);
    const std::int64_t cg = ws[1], kh = ws[2], kw = ws[3], c0 = (o / (ws[0] / g.groups)) * cg;
    double s = bias ? bias_scale * read_value(b, o) : 0.0;
    if (acc != Rounding::none) {
      s = round_accumulator(s, acc);
      auto term = [&](std::int64_t c, std::int64_t u, std::int64_t v) {
        const std::int64_t y = oh * g.stride[0] - g.padding[0] + u * g.dilation[0],
                           xx = ow * g.stride[1] - g.padding[1] + v * g.dilation[1];
        if (y < 0 || y >= xs[2] || xx < 0 || xx >= xs[3]) return;
        const double p = x.load(x.base + n * x.stride[0] + (c0 + c) * x.stride[1] + y * x.stride[2] +
                                xx * x.stride[3]) *
                         w.load(w.base + o * w.stride[0] + c * w.stride[1] + u * w.stride[2] +
                                v * w.stride[3]);
        s = round_accumulator(s + p, acc);
      };
      if (channels_inner) {
        for (std::int64_t u = 0; u < kh; ++u)
          for (std::int64_t v = 0; v < kw; ++v)
            for (std::int64_t c = 0; c < cg; ++c) term(c, u, v);
      } else {
        for (std::int64_t c = 0; c < cg; ++c)
          for (std::int64_t u = 0; u < kh; ++u)
            for (std::int64_t v = 0; v < kw; ++v) term(c, u, v);
      }
      return s;
    }
    const bool plain = x.round == Rounding::none && w.round == Rounding::none &&
                       x.bytes.storage == DType::float32 && w.bytes.storage == DType::float32;
    const float* xp = reinterpret_cast<const float*>(x.bytes.data);
    const float* wp = reinterpret_cast<const float*>(w.bytes.data);
    for (std::int64_t c = 0; c < cg; ++c) {
      const std::int64_t xc = x.base + n * x.stride[0] + (c0 + c) * x.stride[1];
      const std::int64_t wc = w.base + o * w.stride[0] + c * w.stride[1];
      for (std::int64_t u = 0; u < kh; ++u) {
        const std::int64_t y = oh * g.stride[0] - g.padding[0] + u * g.dilation[0];
        if (y < 0 || y >= xs[2]) continue;
        const std::int64_t xr = xc + y * x.stride[2], wr = wc + u * w.stride[2];
        for (std::int64_t v = 0; v < kw; ++v) {
          const std::int64_t xx = ow * g.stride[1] - g.padding[1] + v * g.dilation[1];
          if (xx < 0 || xx >= xs[3]) continue;
          const std::int64_t xo = xr + xx * x.stride[3], wo = wr + v * w.stride[3];
          s += plain ? static_cast<double>(xp[xo]) * wp[wo] : x.load(xo) * w.load(wo);
        }
      }
    }
    return s;
  }
};

bool make_problem(const DiagnosisInput& in, const Shape& out_shape, ConvProblem& P) {
  auto has = [&](const char* n) { return in.inputs.count(n) && in.input_shapes.count(n); };
  if (out_shape.size() != 4 || !has("input") || !has("weight")) return false;
  P.xs = in.input_shapes.at("input");
  P.ws = in.input_shapes.at("weight");
  P.os = out_shape;
  P.g = in.conv;
  P.bias = in.conv.bias && has("bias");
  if (P.bias) P.b = in.inputs.at("bias");
  return P.xs.size() == 4 && P.ws.size() == 4 && P.os[1] == P.ws[0] && P.g.groups >= 1 &&
         P.ws[0] % P.g.groups == 0 && P.xs[0] == P.os[0] && P.xs[1] == P.ws[1] * P.g.groups;
}

}  // namespace

void search_conv_inputs(const DiagnosisInput& in, Search& s) {
  if (in.op != ops::Op::conv2d || in.role != ops::Role::output || in.run_shape != in.shape ||
      in.shape.size() != 4)
    return;
  ConvProblem P;
  if (!make_problem(in, in.shape, P)) return;
  s.family("input_layout");
  const std::int64_t numel = shape_numel(in.shape);
  const ElementTest t = recompute_test(in);
  const auto positions = sample_positions(numel, in.recompute_sample);
  const std::string dx_decl = declared_name(in, "input", "NCHW"),
                    dw_decl = declared_name(in, "weight", "OIHW");
  const DeclaredBytes xb = declared_bytes(in.inputs.at("input"), P.xs, "NCHW",
                                          dx_decl == "NCHW" ? "" : dx_decl);
  const DeclaredBytes wb = declared_bytes(in.inputs.at("weight"), P.ws, "OIHW",
                                          dw_decl == "OIHW" ? "" : dw_decl);
  Operand x0{xb.view, xb.declared}, w0{wb.view, wb.declared};
  x0.prepare();
  w0.prepare();

  auto run = [&](Hypothesis h, Operand x, Operand w, double bias_scale) {
    x.prepare();
    w.prepare();
    const Eval e =
        eval_recompute(in, t, positions, [&](std::int64_t p) { return P.at(p, x, w, bias_scale); });
    finish_recompute(h, e, numel);
    s.add(std::move(h));
  };
  std::vector<ReadCandidate> reads;  // the commonest read mistakes, for the read + write pairs
  auto read_candidate = [&](const Hypothesis& h, Operand x, Operand w) {
    x.prepare();
    w.prepare();
    reads.push_back({h, [&P, x, w](std::int64_t p) { return P.at(p, x, w, 1.0); }});
  };
  const bool x_fortran = dx_decl.find(":F") != std::string::npos,
             w_fortran = dw_decl.find(":F") != std::string::npos;

  // The input read in another layout (any permutation, C/F order, flips of any spatial subset).
  for (const Reading& rd : readings(P.xs, "NCHW", xb.declared, x_fortran)) {
    Hypothesis h;
    h.code = rd.perm_code.empty() ? "flipped" : rd.perm_code + (rd.flips.empty() ? "" : "+flipped");
    h.tensor = "input";
    h.side = "input";
    h.family = "input_layout";
    h.spec = rd.spec;
    h.rank = 10 + rd.rank;
    h.params = {{"declared", dx_decl}, {"read_as", rd.spec}};
    if (!rd.flips.empty()) h.params["flipped"] = rd.flips;
    std::string what = rd.perm_code == "hw_swapped"      ? "with H and W exchanged"
                       : rd.perm_code == "fortran_order" ? "in the opposite memory order"
                       : rd.perm_code == "channels_order" ? "with channels first/last confused"
                       : rd.perm_code == "fortran_order+hw_swapped"
                           ? "in the opposite memory order with H and W exchanged"
                       : rd.perm_code.empty()            ? ""
                                                         : "with its axes in another order";
    if (!rd.flips.empty())
      what += std::string(what.empty() ? "" : " and ") + "with " + axis_words(rd.flips) + " flipped";
    h.description = fmt::format("your program read input.bin {} (declared {}, it read the bytes as "
                                "{}); the output bytes are fine",
                                what, dx_decl, rd.spec);
    h.cause = rd.perm_code == "fortran_order" ? "a C-order file read as column-major, or the reverse"
              : rd.perm_code.empty()          ? "a spatial flip applied to the data"
                                              : "an index expression that does not match the layout";
    h.fix = "check the loop order (or the index expression) where you read input.bin; it is " +
            dx_decl;
    add_aliases(rd, h);
    if (rd.rank <= 3) read_candidate(h, Operand{xb.view, rd.m}, w0);
    run(h, Operand{xb.view, rd.m}, w0, 1.0);
  }

  // The weight read in another layout: OIHW/IOHW/HWIO/WHIO/OHWI confusions, F order, flips.
  for (const Reading& rd : readings(P.ws, "OIHW", wb.declared, w_fortran)) {
    Hypothesis h;
    h.code = rd.perm_code.empty() ? "flipped"
                                  : std::string("weight_layout") + (rd.flips.empty() ? "" : "+flipped");
    h.tensor = "weight";
    h.side = "input";
    h.family = "input_layout";
    h.spec = rd.spec;
    h.rank = 10 + rd.rank;
    h.params = {{"declared", dw_decl}, {"read_as", rd.spec}};
    if (!rd.flips.empty()) h.params["flipped"] = rd.flips;
    if (rd.perm_code.empty()) {
      h.description = fmt::format(
          "your program read weight.bin with {} flipped (declared {}, it read the bytes as {})",
          axis_words(rd.flips), dw_decl, rd.spec);
      h.cause = rd.flips == "HW" ? "a convolution where PyTorch computes a cross-correlation "
                                   "(CUDNN_CONVOLUTION mode with an unflipped filter, or a "
                                   "pre-flipped filter flipped again)"
                                 : "a flip of one kernel axis";
      h.fix = "read the filter as declared (" + dw_decl +
              "): un-flip it, or use CUDNN_CROSS_CORRELATION";
    } else {
      // The same bytes have a C and a Fortran spelling (OIHW = WHIO:F); give both.
      std::string fspell;
      if (rd.flips.empty() && rd.spec.find(':') == std::string::npos)
        fspell = " (the same bytes as " + std::string(rd.spec.rbegin(), rd.spec.rend()) + ":F)";
      h.description =
          fmt::format("your program read weight.bin as {}{} while the layout file declares {}",
                      rd.spec, fspell, dw_decl);
      h.cause = "a weight-layout confusion (OIHW / IOHW / HWIO / WHIO / OHWI)";
      h.fix = "declare weight as " + rd.spec + " in the layout file, or index it as " + dw_decl;
    }
    // Every other weight layout (the OIHW/IOHW/HWIO/WHIO/OHWI family is most of the 24 orders)
    // and a flip alone; not layouts and flips together.
    if (rd.flips.empty() || rd.perm_code.empty()) read_candidate(h, x0, Operand{wb.view, rd.m});
    run(h, x0, Operand{wb.view, rd.m}, 1.0);
  }

  // The commonest pair: the flip that belongs to the weights applied to the data instead.
  s.family("flip_pairs");
  for (const std::string f : {"HW", "H", "W"}) {
    std::vector<bool> fx = xb.declared.flipped, fw = wb.declared.flipped;
    for (char c : f) {
      const auto a = std::string("NCHW").find(c);
      fx[a] = !fx[a];
      fw[a] = !fw[a];
    }
    const layout::Placement mx = layout::placement(P.xs, xb.declared.memory_axes, fx),
                            mw = layout::placement(P.ws, wb.declared.memory_axes, fw);
    if (layout::same_offsets(mx, xb.declared) || layout::same_offsets(mw, wb.declared))
      continue;
    Hypothesis h;
    h.code = "flip_on_data";
    h.tensor = "input";
    h.side = "input";
    h.family = "flip_pairs";
    h.spec = "input+flip=" + f + ",weight+flip=" + f;
    h.rank = 20;
    h.params = {{"flipped", f}};
    h.description = fmt::format(
        "your program flipped the input data ({}) and left the filter as the convolution sees it",
        axis_words(f));
    h.cause = "the spatial flip applied to the data instead of the weights";
    h.fix = "flip the filter (weight.bin), not the input, or compute a cross-correlation";
    read_candidate(h, Operand{xb.view, mx}, Operand{wb.view, mw});
    run(h, Operand{xb.view, mx}, Operand{wb.view, mw}, 1.0);
  }

  // Numbers: inputs rounded before the products, the bias lost or doubled.
  s.family("numeric");
  for (Rounding r : roundings_to_try(in.logical)) {
    Hypothesis h = rounded_inputs_hypothesis(
        r, "input", "the input and weight",
        "CUBLAS_DEFAULT_MATH / cudnnSetConvolutionMathType(CUDNN_FMA_MATH), torch.backends.*.allow_tf32 = False");
    run(h, Operand{xb.view, xb.declared, r}, Operand{wb.view, wb.declared, r}, 1.0);
  }
  // The running sum kept in a narrow type, in the two usual loop orders. Checked against the
  // clean float64 recompute on the same positions (kNarrowFactor, diagnosis_internal.hpp).
  {
    double clean = -1;  // residual of the clean recompute, computed when first needed
    const auto orders = ops::find(ops::Op::conv2d).sum_orders();  // their names and words
    for (Rounding r : accumulators_to_try(in.logical))
      for (const auto& order : orders) {
        const bool inner = order.order == ops::SumOrder::channels_inner;
        Hypothesis h = narrow_accumulation_hypothesis(r, "output", order.name, order.words);
        const Eval e = eval_recompute(in, t, positions, [&](std::int64_t p) {
          return P.at(p, x0, w0, 1.0, r, inner);
        });
        finish_recompute(h, e, numel);
        if (h.passes) {
          if (clean < 0) {
            Eval c;
            for (std::int64_t p : positions)
              c.add(round_to_logical(P.at(p, x0, w0, 1.0), in.logical), read_value(in.run, p), t);
            clean = c.max_abs;
          }
          h.params["clean_residual"] = clean;
          h.passes = h.max_abs * kNarrowFactor <= clean;
        }
        s.add(std::move(h));
      }
  }
  if (P.bias) {
    bias_hypotheses([&](Hypothesis h, double scale) { run(std::move(h), x0, w0, scale); });
  }
  // Pairs, unless a read or arithmetic mistake alone explains the output. A write-only match does
  // not stop them: with stride 1 and symmetric padding, data and filter flipped and the output
  // written H/W-swapped ARE the output written swapped and flipped, and only the loss (read with
  // the op, diagnosis_op.cpp) tells the two apart.
  if (!any_read_match(s)) search_write_pairs(in, s, reads);
}

}  // namespace validate::compare::detail
