// Input side, matmul: an operand read transposed (for B, a Linear weight's [out,in] read where
// [in,out] is meant), both transposed, or the operands rounded before the products. Recomputed
// in float64 at sampled output positions through matmul's per-element sum (OpDef::output_element,
// harness/ops/matmul/element_matmul.cpp), from the bytes the program was handed.
#include <fmt/format.h>

#include "diagnosis_internal.hpp"
#include "diagnosis_operand.hpp"

namespace validate::compare::detail {

void search_matmul_inputs(const DiagnosisInput& in, Search& s) {
  if (in.op != ops::Op::matmul || in.role != ops::Role::output || in.run_shape != in.shape || in.shape.size() != 2)
    return;
  auto has = [&](const char* n) { return in.inputs.count(n) && in.input_shapes.count(n); };
  if (!has("A") || !has("B")) return;
  const Shape as = in.input_shapes.at("A"), bs = in.input_shapes.at("B");
  if (as.size() != 2 || bs.size() != 2 || as[1] != bs[0] || in.shape[0] != as[0] ||
      in.shape[1] != bs[1])
    return;
  const std::int64_t numel = shape_numel(in.shape);
  const ElementRecompute R(ops::Op::matmul, ops::MatmulParams{as[0], as[1], bs[1]});
  const ElementTest t = recompute_test(in);
  const auto positions = sample_positions(numel, in.recompute_sample);
  const std::string da = declared_name(in, "A", "MK"), db = declared_name(in, "B", "KN");
  const DeclaredBytes ab = declared_bytes(in.inputs.at("A"), as, "MK", da == "MK" ? "" : da);
  const DeclaredBytes bb = declared_bytes(in.inputs.at("B"), bs, "KN", db == "KN" ? "" : db);
  auto transposed = [](const DeclaredBytes& d) {
    std::vector<int> rev(d.declared.memory_axes.rbegin(), d.declared.memory_axes.rend());
    return layout::placement(d.declared.canonical_shape, std::move(rev), d.declared.flipped);
  };
  // A and B read through ma and mb, rounded to r on every load.
  auto operands = [&](const layout::Placement& ma, const layout::Placement& mb, Rounding r) {
    return R.with("A", Operand{ab.view, ma, r}, "B", Operand{bb.view, mb, r});
  };
  DeclaredRecompute declared(in, [&R, abr = operands(ab.declared, bb.declared, Rounding::none)](std::int64_t i) {
    return R.at(i, abr, recompute_options());
  });
  auto run = [&](Hypothesis h, const layout::Placement& ma, const layout::Placement& mb, Rounding r) {
    const ops::ElementOperands abr = operands(ma, mb, r);
    const ops::ElementOptions opt = recompute_options();
    const Eval e = eval_recompute(in, t, positions, [&](std::int64_t i) { return R.at(i, abr, opt); });
    finish_recompute(h, e, numel);
    if (h.passes && declared.coincides(positions.size(), [&](std::size_t k) {
          return Predicted{positions[k], R.at(positions[k], abr, opt)};
        }))
      return s.coincident(std::move(h));
    s.add(std::move(h));
  };
  std::vector<ReadCandidate> reads;  // for the read + write pairs
  auto read_candidate = [&](const Hypothesis& h, layout::Placement ma, layout::Placement mb) {
    reads.push_back({h, [&R, abr = operands(ma, mb, Rounding::none)](std::int64_t i) {
                       return R.at(i, abr, recompute_options());
                     }});
  };
  // Numbers: the operands rounded before the products, the running sum kept in a narrow type,
  // summed over k in order. A rounding-sized failure is searched for nothing else.
  auto numbers = [&] {
    s.family("numeric");
    for (Rounding r : roundings_to_try(in.logical)) {
      Hypothesis h = rounded_inputs_hypothesis(r, "A,B", "A and B",
                                               "CUBLAS_DEFAULT_MATH, torch.backends.cuda.matmul.allow_tf32 = False");
      run(h, ab.declared, bb.declared, r);
    }
    search_narrow_accumulation(in, s, t, positions, numel, R, operands(ab.declared, bb.declared, Rounding::none));
  };
  if (in.rounding_sized) return numbers();
  s.family("input_layout");
  const bool a1 = as[0] > 1 && as[1] > 1, b1 = bs[0] > 1 && bs[1] > 1;  // else transposing is a no-op
  if (b1) {
    Hypothesis h;
    h.code = "transposed";
    h.tensor = "B";
    h.side = "input";
    h.family = "input_layout";
    h.spec = "matmul:B=NK";
    h.rank = 12;
    h.params = {{"declared", db}, {"read_as", db == "KN" ? "NK" : "transposed " + db}};
    h.description = "your program read B transposed: recomputed as A times B with B's bytes read "
                    "as [N,K]";
    h.cause = "B read in NK layout (a Linear weight's [out,in]) instead of KN ([in,out])";
    h.fix = "index B as " + db + " (B[k][n]), or transpose the Linear weight before the product";
    read_candidate(h, ab.declared, transposed(bb));
    run(h, ab.declared, transposed(bb), Rounding::none);
  }
  if (a1) {
    Hypothesis h;
    h.code = "transposed";
    h.tensor = "A";
    h.side = "input";
    h.family = "input_layout";
    h.spec = "matmul:A=KM";
    h.rank = 12;
    h.params = {{"declared", da}, {"read_as", da == "MK" ? "KM" : "transposed " + da}};
    h.description = "your program read A transposed: recomputed with A's bytes read as [K,M]";
    h.cause = "A read in KM (column-major) layout instead of MK";
    h.fix = "index A as " + da + " (A[m][k])";
    read_candidate(h, transposed(ab), bb.declared);
    run(h, transposed(ab), bb.declared, Rounding::none);
  }
  if (a1 && b1) {
    Hypothesis h;
    h.code = "transposed";
    h.tensor = "A,B";
    h.side = "input";
    h.family = "input_layout";
    h.spec = "matmul:A=KM,B=NK";
    h.rank = 14;
    h.params = {{"declared", da + "," + db}, {"read_as", "both transposed"}};
    h.description = "your program read both A and B transposed (column-major reads of C-order "
                    "files, or the reverse)";
    h.cause = "both operands in the other memory order";
    h.fix = "index A as " + da + " and B as " + db;
    run(h, transposed(ab), transposed(bb), Rounding::none);
  }
  numbers();
  if (!any_read_match(s)) search_write_pairs(in, s, reads, declared);  // as in conv2d
}

}  // namespace validate::compare::detail
