// Input side, conv_transpose2d: the program READ its weight (or input) in another layout. The
// weight of a transposed convolution is (in, out/groups, kh, kw) — IOHW — and the classic port
// mistake is indexing it as a conv2d's OIHW; every reading of the weight's bytes is recomputed at
// sampled output positions with the op's float64 per-element sum (OpDef::output_element,
// harness/ops/conv_transpose2d/element_conv_transpose2d.cpp) and the ones that reproduce the run
// are named.
#include <fmt/format.h>

#include "diagnosis_internal.hpp"
#include "diagnosis_operand.hpp"

namespace validate::compare::detail {

namespace {

// conv_transpose2d's parameters from the diagnosis input (the output padding is what makes the
// output the reference's); false when they do not fit together.
bool make_params(const DiagnosisInput& in, ops::ConvTransposeParams& p) {
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
  if (!make_params(in, cp)) return;
  const Shape xs = in.input_shapes.at("input"), ws = in.input_shapes.at("weight");
  ElementRecompute R(ops::Op::conv_transpose2d, cp);
  if (cp.bias) R.fixed["bias"] = contiguous_operand(in.inputs.at("bias"));
  s.family("input_layout");
  const std::int64_t numel = shape_numel(in.shape);
  const ElementTest t = recompute_test(in);
  const auto positions = sample_positions(numel, in.recompute_sample);
  const std::string dx_decl = declared_name(in, "input", "NCHW"), dw_decl = declared_name(in, "weight", "IOHW");
  const DeclaredBytes xb = declared_bytes(in.inputs.at("input"), xs, "NCHW", dx_decl == "NCHW" ? "" : dx_decl);
  const DeclaredBytes wb = declared_bytes(in.inputs.at("weight"), ws, "IOHW", dw_decl == "IOHW" ? "" : dw_decl);
  const Operand x0{xb.view, xb.declared}, w0{wb.view, wb.declared};
  auto run = [&](Hypothesis h, Operand x, Operand w, double bias_scale) {
    const ops::ElementOperands xw = R.with("input", x, "weight", w);
    const ops::ElementOptions opt = recompute_options(bias_scale);
    const Eval e = eval_recompute(in, t, positions, [&](std::int64_t p) { return R.at(p, xw, opt); });
    finish_recompute(h, e, numel);
    s.add(std::move(h));
  };

  // The weight read in another layout; OIHW (a conv2d's weight order) named as the classic confusion.
  for (const Reading& rd : readings(ws, "IOHW", wb.declared, dw_decl.find(":F") != std::string::npos)) {
    Hypothesis h;
    const bool oihw = rd.flips.empty() && rd.spec == "OIHW";
    h.code = rd.perm_code.empty() ? "flipped" : std::string("weight_layout") + (rd.flips.empty() ? "" : "+flipped");
    h.tensor = "weight";
    h.side = "input";
    h.family = "input_layout";
    h.spec = rd.spec;
    h.rank = 10 + rd.rank - (oihw ? 1 : 0);
    h.params = {{"declared", dw_decl}, {"read_as", rd.spec}};
    if (!rd.flips.empty()) h.params["flipped"] = rd.flips;
    if (oihw) {
      h.description = fmt::format("your program read the conv_transpose2d weight.bin as OIHW (a conv2d's "
                                  "out, in order) while it is IOHW = (in, out/groups, kh, kw), declared {}",
                                  dw_decl);
      h.cause = "the IOHW/OIHW confusion: a transposed convolution's weight indexed like a conv2d's";
      h.fix = "index the weight as w[in][out/groups][kh][kw] (PyTorch's ConvTranspose2d.weight), or declare "
              "weight as OIHW in the layout file if the program really stores it that way";
    } else {
      h.description = fmt::format("your program read weight.bin as {} while the layout file declares {}", rd.spec,
                                  dw_decl);
      h.cause = "a weight-layout confusion (IOHW / OIHW / HWIO / flips)";
      h.fix = "declare weight as " + rd.spec + " in the layout file, or index it as " + dw_decl;
    }
    add_aliases(rd, h);
    run(h, x0, Operand{wb.view, rd.m}, 1.0);
  }
  // The input read in another layout.
  for (const Reading& rd : readings(xs, "NCHW", xb.declared, dx_decl.find(":F") != std::string::npos)) {
    Hypothesis h;
    h.code = rd.code();
    h.tensor = "input";
    h.side = "input";
    h.family = "input_layout";
    h.spec = rd.spec;
    h.rank = 10 + rd.rank;
    h.params = {{"declared", dx_decl}, {"read_as", rd.spec}};
    h.description = fmt::format("your program read input.bin as {} (declared {})", rd.spec, dx_decl);
    h.cause = "an index expression that does not match the layout";
    h.fix = "check the loop order (or the index expression) where you read input.bin; it is " + dx_decl;
    add_aliases(rd, h);
    run(h, Operand{xb.view, rd.m}, w0, 1.0);
  }
  if (cp.bias) {
    s.family("numeric");
    bias_hypotheses([&](Hypothesis h, double scale) { run(std::move(h), x0, w0, scale); });
  }
}

}  // namespace validate::compare::detail
