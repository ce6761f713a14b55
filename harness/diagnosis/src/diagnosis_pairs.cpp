// Pairs: a read-side and a write-side mistake at once ("input read with H and W exchanged AND the
// output handed over column-major"). Neither family alone can explain such a run: the output
// bytes are no re-arrangement of the right output, and no misreading reproduces them as declared.
// The read hypotheses come from the input-side families (diagnosis_conv_recompute.cpp,
// diagnosis_matmul_recompute.cpp) with their recompute function; each is tried against the
// output bytes re-read through the commonest write readings (flips, the reversed order, H<->W,
// channels first/last, reversed + H<->W, and those with flips: `Reading::rank` <= 3).
//
// Cost: a read hypothesis's recomputed values are cached per sampled position, so the pairs cost
// what the read hypotheses alone cost (a wrong pair fails on its first positions, which every
// pair of that read shares) plus cheap byte lookups: on a failing ic=8192 conv2d output nothing
// measurable next to the single hypotheses (bench/diagnosis, docs/evidence.md "Diagnosis cost").
// Searched when no read or arithmetic hypothesis fits alone, even when a write one does: with
// stride 1 and symmetric padding, flipped data and filter plus an H/W-swapped write ARE a swapped
// and flipped write, and only the loss (diagnosis_op.cpp) tells which it was.
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "diagnosis_internal.hpp"

namespace validate::compare::detail {

namespace {

std::string write_words(const Reading& rd) {
  std::string w =
      rd.perm_code == "hw_swapped" ? "with H and W exchanged"
      : rd.perm_code == "fortran_order"
          ? "in the opposite memory order (column-major handed over as C order, or the reverse)"
      : rd.perm_code == "transposed"     ? "transposed"
      : rd.perm_code == "channels_order" ? "with channels first and last confused"
      : rd.perm_code == "fortran_order+hw_swapped"
          ? "in the opposite memory order with H and W exchanged"
      : rd.perm_code.empty() ? ""
                             : "with its axes in another order";
  if (!rd.flips.empty())
    w += std::string(w.empty() ? "" : " and ") + "with " + axis_words(rd.flips) + " flipped";
  return w;
}

// The read hypothesis's sentence without its "the output bytes are fine" (not true of a pair).
std::string read_words(const Hypothesis& h) {
  std::string d = h.description;
  const std::string fine = "; the output bytes are fine";
  if (auto at = d.find(fine); at != std::string::npos) d.erase(at, fine.size());
  return d;
}

}  // namespace

bool any_read_match(const Search& s) {
  for (const Hypothesis& h : s.dx.matches)
    if (h.side != "output") return true;
  return false;
}

void search_write_pairs(const DiagnosisInput& in, Search& s, std::vector<ReadCandidate>& reads,
                        DeclaredRecompute& declared_sums) {
  if (reads.empty() || in.run_shape != in.shape) return;
  s.family("read_write_pairs");
  const std::int64_t numel = shape_numel(in.shape);
  const ElementTest t = recompute_test(in);
  const auto positions = sample_positions(numel, in.recompute_sample);
  // The bytes the program wrote (the run put back into its declared layout), as in
  // diagnosis_output_side.cpp.
  const DeclaredBytes b = declared_bytes(in.run, in.shape, in.axes, in.declared_layout);
  const std::string declared = in.declared_layout.empty() ? in.axes : in.declared_layout;
  std::vector<Reading> writes;
  for (Reading& rd :
       readings(in.shape, in.axes, b.declared, declared.find(":F") != std::string::npos))
    if (rd.rank <= 3) writes.push_back(std::move(rd));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::vector<double>> cache(reads.size(), std::vector<double>(positions.size(), nan));
  const std::vector<std::int64_t> idx = unravel_all(positions, in.shape);
  const std::size_t rank = in.shape.size();
  for (const Reading& w : writes) {
    for (std::size_t r = 0; r < reads.size(); ++r) {
      const Hypothesis& rh = reads[r].h;
      Eval e;
      for (std::size_t k = 0; k < positions.size(); ++k) {
        double& v = cache[r][k];
        if (std::isnan(v)) v = reads[r].value(positions[k]);
        e.add(round_to_logical(v, in.logical), read_value(b.view, w.m.offset_of(idx.data() + k * rank)), t);
        if (e.beyond > 0 && e.checked >= 4) break;
      }
      Hypothesis h;
      h.code = "read_write_pair";
      h.tensor = rh.tensor + "," + in.tensor;
      h.side = "input";  // a read mistake is in it: the loss is wrong (diagnosis_op.cpp)
      h.family = "read_write_pairs";
      h.spec = rh.spec + "|" + w.spec;
      h.rank = 100 + rh.rank + w.rank;
      nlohmann::json rp = rh.params;
      rp["code"] = rh.code;
      rp["tensor"] = rh.tensor;
      nlohmann::json wp = {
          {"code", w.code()}, {"tensor", in.tensor}, {"declared", declared}, {"bytes", w.spec}};
      if (!w.flips.empty()) wp["flipped"] = w.flips;
      h.params = {{"read", rp}, {"write", wp}};
      h.description = fmt::format(
          "two mistakes at once: (1) {}; (2) it wrote {} {} (declared {}, the bytes are {})",
          read_words(rh), written_name(in), write_words(w), declared, in_notation_of(w.spec, declared, in.axes));
      h.cause = rh.cause + ", and the result written in another layout than declared";
      h.fix = rh.fix + "; and write " + written_name(in) + " as " + declared +
              " (check the loop order where you write it)";
      finish_recompute(h, e, numel);
      // The pair predicts that the element at position p of the read hypothesis sits where the
      // write reading puts it; read back through the declaration, that is canonical position q.
      if (h.passes && declared_sums.coincides(positions.size(), [&](std::size_t k) {
            return Predicted{canonical_at(b.declared, w.m.offset_of(idx.data() + k * rank)), cache[r][k]};
          }))
        s.coincident(std::move(h));
      else
        s.add(std::move(h));
    }
  }
}

}  // namespace validate::compare::detail
