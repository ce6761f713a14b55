// Input side, conv_transpose2d: the program READ its weight (or input) in another layout. The
// weight of a transposed convolution is (in, out/groups, kh, kw) — IOHW — and the classic port
// mistake is indexing it as a conv2d's OIHW; every reading of the weight's bytes is recomputed at
// sampled output positions with the op's float64 per-element sum (OpDef::output_element,
// harness/ops/conv_transpose2d/element_conv_transpose2d.cpp) and the ones that reproduce the run
// are named.
#include <fmt/format.h>

#include "diagnosis_conv_like_search.hpp"

namespace validate::compare::detail {

namespace {

// conv_transpose2d's parameters from the diagnosis input (the output padding is what makes the
// output the reference's); false when they do not fit together.
bool make_transpose_params(const DiagnosisInput& in, ops::ConvTransposeParams& p) {
  if (!conv_like_params(in, p)) return false;
  const Shape &ws = in.input_shapes.at("weight"), &os = in.shape;
  p.o = ws[1] * p.groups;
  p.output_padding = {os[2] - p.hout(), os[3] - p.wout()};
  return p.c == ws[0] && p.c % p.groups == 0 && os[1] == p.o && p.n == os[0] && p.output_padding[0] >= 0 &&
         p.output_padding[1] >= 0;
}

}  // namespace

void search_conv_transpose_inputs(const DiagnosisInput& in, Search& s) {
  if (in.op != ops::Op::conv_transpose2d || in.role != ops::Role::output || in.run_shape != in.shape || in.shape.size() != 4)
    return;
  ops::ConvTransposeParams cp;
  if (!make_transpose_params(in, cp)) return;
  ConvLikeSearch S(in, s, cp, "IOHW");
  s.family("input_layout");

  // The weight read in another layout; OIHW (a conv2d's weight order) named as the classic confusion.
  for (const Reading& rd : readings(S.ws, "IOHW", S.wb.declared, S.dw_decl.find(":F") != std::string::npos)) {
    Hypothesis h;
    const bool oihw = rd.flips.empty() && rd.spec == "OIHW";
    h.code = rd.perm_code.empty() ? "flipped" : std::string("weight_layout") + (rd.flips.empty() ? "" : "+flipped");
    h.tensor = "weight";
    h.side = "input";
    h.family = "input_layout";
    h.spec = rd.spec;
    h.rank = 10 + rd.rank - (oihw ? 1 : 0);
    h.params = {{"declared", S.dw_decl}, {"read_as", rd.spec}};
    if (!rd.flips.empty()) h.params["flipped"] = rd.flips;
    if (oihw) {
      h.description = fmt::format("your program read the conv_transpose2d weight.bin as OIHW (a conv2d's "
                                  "out, in order) while it is IOHW = (in, out/groups, kh, kw), declared {}",
                                  S.dw_decl);
      h.cause = "the IOHW/OIHW confusion: a transposed convolution's weight indexed like a conv2d's";
      h.fix = "index the weight as w[in][out/groups][kh][kw] (PyTorch's ConvTranspose2d.weight), or declare "
              "weight as OIHW in the layout file if the program really stores it that way";
    } else {
      h.description = fmt::format("your program read weight.bin as {} while the layout file declares {}",
                                  in_notation_of(rd.spec, S.dw_decl, "IOHW"),
                                  S.dw_decl);
      h.cause = "a weight-layout confusion (IOHW / OIHW / HWIO / flips)";
      h.fix = "declare weight as " + rd.spec + " in the layout file, or index it as " + S.dw_decl;
    }
    add_aliases(rd, h);
    S.run(h, S.x0, Operand{S.wb.view, rd.m}, 1.0);
  }
  // The input read in another layout.
  for (const Reading& rd : readings(S.xs, "NCHW", S.xb.declared, S.dx_decl.find(":F") != std::string::npos)) {
    Hypothesis h;
    h.code = rd.code();
    h.tensor = "input";
    h.side = "input";
    h.family = "input_layout";
    h.spec = rd.spec;
    h.rank = 10 + rd.rank;
    h.params = {{"declared", S.dx_decl}, {"read_as", rd.spec}};
    h.description = fmt::format("your program read input.bin as {} (declared {})",
                                in_notation_of(rd.spec, S.dx_decl, "NCHW"), S.dx_decl);
    h.cause = "an index expression that does not match the layout";
    h.fix = "check the loop order (or the index expression) where you read input.bin; it is " + S.dx_decl;
    add_aliases(rd, h);
    S.run(h, Operand{S.xb.view, rd.m}, S.w0, 1.0);
  }
  if (cp.bias) {
    s.family("numeric");
    bias_hypotheses([&](Hypothesis h, double scale) { S.run(std::move(h), S.x0, S.w0, scale); });
  }
}

}  // namespace validate::compare::detail
