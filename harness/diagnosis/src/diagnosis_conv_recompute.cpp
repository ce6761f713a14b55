// Input side, conv2d: the program READ its inputs wrongly (or did the arithmetic differently), so
// its output is not a re-arrangement of the right one. Each hypothesis recomputes the output in
// float64 at sampled positions through conv2d's own per-element sum (OpDef::output_element,
// harness/ops/conv2d/element_conv2d.cpp), from the reference inputs as the program would have seen
// them: the bytes it was handed (the inputs in their declared layouts) read in another layout,
// flipped, rounded, or with the bias lost or doubled. Output positions only: a few hundred of them
// cost K multiply-adds each, so a failing ic=8192 tensor is diagnosed in well under a second.
#include <cmath>

#include <fmt/format.h>

#include "diagnosis_conv_like_search.hpp"
#include "validate/ops/registry.hpp"

namespace validate::compare::detail {

namespace {

// conv2d's parameters from the diagnosis input; false when they do not describe a convolution
// that produces the output.
bool make_params(const DiagnosisInput& in, ops::ConvParams& p) {
  if (!conv_like_params(in, p)) return false;
  const Shape &ws = in.input_shapes.at("weight"), &os = in.shape;
  p.o = ws[0];
  return os[1] == p.o && p.o % p.groups == 0 && p.n == os[0] && p.c == ws[1] * p.groups && p.hout() == os[2] &&
         p.wout() == os[3];
}

}  // namespace

void search_conv_inputs(const DiagnosisInput& in, Search& s) {
  if (in.op != ops::Op::conv2d || in.role != ops::Role::output || in.run_shape != in.shape ||
      in.shape.size() != 4)
    return;
  ops::ConvParams cp;
  if (!make_params(in, cp)) return;
  ConvLikeSearch S(in, s, cp, "OIHW");
  const ops::ElementOperands declared = S.R.with("input", S.x0, "weight", S.w0);
  // Numbers: inputs rounded before the products, the running sum kept in a narrow type in the two
  // usual loop orders. A rounding-sized failure is searched for nothing else.
  auto numbers = [&] {
    s.family("numeric");
    for (Rounding r : roundings_to_try(in.logical)) {
      Hypothesis h = rounded_inputs_hypothesis(
          r, "input", "the input and weight",
          "CUBLAS_DEFAULT_MATH / cudnnSetConvolutionMathType(CUDNN_FMA_MATH), torch.backends.*.allow_tf32 = False");
      S.run(h, Operand{S.xb.view, S.xb.declared, r}, Operand{S.wb.view, S.wb.declared, r}, 1.0);
    }
    search_narrow_accumulation(in, s, S.t, S.positions, S.numel, S.R, declared);
  };
  if (in.rounding_sized) return numbers();
  s.family("input_layout");

  std::vector<ReadCandidate> reads;  // the commonest read mistakes, for the read + write pairs
  auto read_candidate = [&](const Hypothesis& h, Operand x, Operand w) {
    reads.push_back({h, [&R = S.R, xw = S.R.with("input", x, "weight", w)](std::int64_t p) {
                       return R.at(p, xw, recompute_options());
                     }});
  };
  const bool x_fortran = S.dx_decl.find(":F") != std::string::npos,
             w_fortran = S.dw_decl.find(":F") != std::string::npos;

  // The input read in another layout (any permutation, C/F order, flips of any spatial subset).
  for (const Reading& rd : readings(S.xs, "NCHW", S.xb.declared, x_fortran)) {
    Hypothesis h;
    h.code = rd.code();
    h.tensor = "input";
    h.side = "input";
    h.family = "input_layout";
    h.spec = rd.spec;
    h.rank = 10 + rd.rank;
    h.params = {{"declared", S.dx_decl}, {"read_as", rd.spec}};
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
                                what, S.dx_decl, in_notation_of(rd.spec, S.dx_decl, "NCHW"));
    h.cause = rd.perm_code == "fortran_order" ? "a C-order file read as column-major, or the reverse"
              : rd.perm_code.empty()          ? "a spatial flip applied to the data"
                                              : "an index expression that does not match the layout";
    h.fix = "check the loop order (or the index expression) where you read input.bin; it is " +
            S.dx_decl;
    add_aliases(rd, h);
    if (rd.rank <= 3) read_candidate(h, Operand{S.xb.view, rd.m}, S.w0);
    S.run(h, Operand{S.xb.view, rd.m}, S.w0, 1.0);
  }

  // The weight read in another layout: OIHW/IOHW/HWIO/WHIO/OHWI confusions, F order, flips.
  for (const Reading& rd : readings(S.ws, "OIHW", S.wb.declared, w_fortran)) {
    Hypothesis h;
    h.code = rd.perm_code.empty() ? "flipped"
                                  : std::string("weight_layout") + (rd.flips.empty() ? "" : "+flipped");
    h.tensor = "weight";
    h.side = "input";
    h.family = "input_layout";
    h.spec = rd.spec;
    h.rank = 10 + rd.rank;
    h.params = {{"declared", S.dw_decl}, {"read_as", rd.spec}};
    if (!rd.flips.empty()) h.params["flipped"] = rd.flips;
    if (rd.perm_code.empty()) {
      h.description = fmt::format(
          "your program read weight.bin with {} flipped (declared {}, it read the bytes as {})",
          axis_words(rd.flips), S.dw_decl, in_notation_of(rd.spec, S.dw_decl, "OIHW"));
      h.cause = rd.flips == "HW" ? "a convolution where PyTorch computes a cross-correlation "
                                   "(CUDNN_CONVOLUTION mode with an unflipped filter, or a "
                                   "pre-flipped filter flipped again)"
                                 : "a flip of one kernel axis";
      h.fix = "read the filter as declared (" + S.dw_decl +
              "): un-flip it, or use CUDNN_CROSS_CORRELATION";
    } else {
      // The same bytes have a C and a Fortran spelling (OIHW = WHIO:F); give both.
      // For a Fortran declaration, in its notation first.
      std::string as_read = in_notation_of(rd.spec, S.dw_decl, "OIHW");
      if (as_read == rd.spec && rd.flips.empty() && rd.spec.find(':') == std::string::npos)
        as_read += " (the same bytes as " + std::string(rd.spec.rbegin(), rd.spec.rend()) + ":F)";
      h.description =
          fmt::format("your program read weight.bin as {} while the layout file declares {}", as_read, S.dw_decl);
      h.cause = "a weight-layout confusion (OIHW / IOHW / HWIO / WHIO / OHWI)";
      h.fix = "declare weight as " + rd.spec + " in the layout file, or index it as " + S.dw_decl;
    }
    // Every other weight layout (the OIHW/IOHW/HWIO/WHIO/OHWI family is most of the 24 orders)
    // and a flip alone; not layouts and flips together.
    if (rd.flips.empty() || rd.perm_code.empty()) read_candidate(h, S.x0, Operand{S.wb.view, rd.m});
    S.run(h, S.x0, Operand{S.wb.view, rd.m}, 1.0);
  }

  // The commonest pair: the flip that belongs to the weights applied to the data instead.
  s.family("flip_pairs");
  for (const std::string f : {"HW", "H", "W"}) {
    std::vector<bool> fx = S.xb.declared.flipped, fw = S.wb.declared.flipped;
    for (char c : f) {
      const auto a = std::string("NCHW").find(c);
      fx[a] = !fx[a];
      fw[a] = !fw[a];
    }
    const layout::Placement mx = layout::placement(S.xs, S.xb.declared.memory_axes, fx),
                            mw = layout::placement(S.ws, S.wb.declared.memory_axes, fw);
    if (layout::same_offsets(mx, S.xb.declared) || layout::same_offsets(mw, S.wb.declared))
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
    read_candidate(h, Operand{S.xb.view, mx}, Operand{S.wb.view, mw});
    S.run(h, Operand{S.xb.view, mx}, Operand{S.wb.view, mw}, 1.0);
  }

  numbers();
  // The bias lost or doubled.
  if (cp.bias) {
    bias_hypotheses([&](Hypothesis h, double scale) { S.run(std::move(h), S.x0, S.w0, scale); });
  }
  // Pairs, unless a read or arithmetic mistake alone explains the output. A write-only match does
  // not stop them: with stride 1 and symmetric padding, data and filter flipped and the output
  // written H/W-swapped ARE the output written swapped and flipped, and only the loss (read with
  // the op, diagnosis_op.cpp) tells the two apart.
  if (!any_read_match(s)) search_write_pairs(in, s, reads, *S.declared);
}

}  // namespace validate::compare::detail
