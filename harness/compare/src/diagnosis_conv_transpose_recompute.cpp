// Input side, conv_transpose2d: the program READ its weight (or input) in another layout. The
// weight of a transposed convolution is (in, out/groups, kh, kw) — IOHW — and the classic port
// mistake is indexing it as a conv2d's OIHW; every reading of the weight's bytes is recomputed at
// sampled output positions with a float64 direct sum and the ones that reproduce the run are named.
#include <fmt/format.h>

#include "diagnosis_internal.hpp"
#include "diagnosis_operand.hpp"

namespace validate::compare::detail {

namespace {

struct ConvTransposeProblem {
  Shape xs, ws, os;  // input NCHW, weight IOHW, output NCHW
  ConvGeometry g;
  bool bias = false;
  ArrayView b;
  // y[n,o,oh,ow] = sum over c of o's group, kh, kw with oh = ih*s - p + kh*d of x[n,c,ih,iw] w[c,o%Og,kh,kw].
  double at(std::int64_t i, const Operand& x, const Operand& w, double bias_scale) const {
    const std::int64_t ow = i % os[3], oh = (i / os[3]) % os[2], o = (i / (os[3] * os[2])) % os[1],
                       n = i / (os[3] * os[2] * os[1]);
    const std::int64_t og = ws[1], cg = xs[1] / g.groups, grp = o / og, oc = o % og;
    double s = bias ? bias_scale * read_value(b, o) : 0.0;
    for (std::int64_t c = grp * cg; c < (grp + 1) * cg; ++c)
      for (std::int64_t u = 0; u < ws[2]; ++u) {
        const std::int64_t ty = oh + g.padding[0] - u * g.dilation[0];
        if (ty < 0 || ty % g.stride[0] || ty / g.stride[0] >= xs[2]) continue;
        for (std::int64_t v = 0; v < ws[3]; ++v) {
          const std::int64_t tx = ow + g.padding[1] - v * g.dilation[1];
          if (tx < 0 || tx % g.stride[1] || tx / g.stride[1] >= xs[3]) continue;
          const std::int64_t xo = x.base + n * x.stride[0] + c * x.stride[1] + ty / g.stride[0] * x.stride[2] +
                                  tx / g.stride[1] * x.stride[3];
          const std::int64_t wo = w.base + c * w.stride[0] + oc * w.stride[1] + u * w.stride[2] + v * w.stride[3];
          s += x.load(xo) * w.load(wo);
        }
      }
    return s;
  }
};

bool make_problem(const DiagnosisInput& in, ConvTransposeProblem& P) {
  auto has = [&](const char* n) { return in.inputs.count(n) && in.input_shapes.count(n); };
  if (in.shape.size() != 4 || !has("input") || !has("weight")) return false;
  P.xs = in.input_shapes.at("input");
  P.ws = in.input_shapes.at("weight");
  P.os = in.shape;
  P.g = in.conv;
  P.bias = in.conv.bias && has("bias");
  if (P.bias) P.b = in.inputs.at("bias");
  return P.xs.size() == 4 && P.ws.size() == 4 && P.g.groups >= 1 && P.xs[1] == P.ws[0] &&
         P.xs[1] % P.g.groups == 0 && P.os[1] == P.ws[1] * P.g.groups && P.xs[0] == P.os[0] && P.g.stride[0] >= 1 &&
         P.g.stride[1] >= 1;
}

}  // namespace

void search_conv_transpose_inputs(const DiagnosisInput& in, Search& s) {
  if (in.op != ops::Op::conv_transpose2d || in.role != ops::Role::output || in.run_shape != in.shape || in.shape.size() != 4)
    return;
  ConvTransposeProblem P;
  if (!make_problem(in, P)) return;
  s.family("input_layout");
  const std::int64_t numel = shape_numel(in.shape);
  const ElementTest t = recompute_test(in);
  const auto positions = sample_positions(numel, in.recompute_sample);
  const std::string dx_decl = declared_name(in, "input", "NCHW"), dw_decl = declared_name(in, "weight", "IOHW");
  const DeclaredBytes xb = declared_bytes(in.inputs.at("input"), P.xs, "NCHW", dx_decl == "NCHW" ? "" : dx_decl);
  const DeclaredBytes wb = declared_bytes(in.inputs.at("weight"), P.ws, "IOHW", dw_decl == "IOHW" ? "" : dw_decl);
  Operand x0{xb.view, xb.declared}, w0{wb.view, wb.declared};
  x0.prepare();
  w0.prepare();
  auto run = [&](Hypothesis h, Operand x, Operand w, double bias_scale) {
    x.prepare();
    w.prepare();
    const Eval e = eval_recompute(in, t, positions, [&](std::int64_t p) { return P.at(p, x, w, bias_scale); });
    finish_recompute(h, e, numel);
    s.add(std::move(h));
  };

  // The weight read in another layout; OIHW (a conv2d's weight order) named as the classic confusion.
  for (const Reading& rd : readings(P.ws, "IOHW", wb.declared, dw_decl.find(":F") != std::string::npos)) {
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
  for (const Reading& rd : readings(P.xs, "NCHW", xb.declared, dx_decl.find(":F") != std::string::npos)) {
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
  if (P.bias) {
    s.family("numeric");
    bias_hypotheses([&](Hypothesis h, double scale) { run(std::move(h), x0, w0, scale); });
  }
}

}  // namespace validate::compare::detail
