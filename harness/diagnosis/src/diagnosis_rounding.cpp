// The roundings the diagnosis tries: a narrow accumulator (bfloat16, float16, TF32 sums), inputs
// rounded before the op, and a float64 value rounded to the logical dtype.
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "diagnosis_internal.hpp"
#include "diagnosis_operand.hpp"
#include "validate/metrics/ulp.hpp"

namespace validate::compare::detail {

ops::LoadRounding load_rounding_of(Rounding r) {
  switch (r) {
    case Rounding::tf32: return ops::LoadRounding::tf32;
    case Rounding::bfloat16: return ops::LoadRounding::bfloat16;
    case Rounding::float16: return ops::LoadRounding::float16;
    default: return ops::LoadRounding::none;  // none, float32: x is a float already
  }
}

float round_as(float x, Rounding r) { return ops::round_load(x, load_rounding_of(r)); }

// Only accumulators narrower than float32: a float32 running sum, in any order, is the declared
// computation of every case dtype (the error bound's own model, docs/compare.md), so a run it
// reproduces is correct and naming it as a mistake would send the user to change correct code; a
// gate it fails is tighter than the computation allows, which the rounding-sized verdict says.
std::vector<Rounding> accumulators_to_try(DType) { return {Rounding::bfloat16, Rounding::float16}; }

Hypothesis narrow_accumulation_hypothesis(Rounding r, const std::string& tensors,
                                          const std::string& order, const std::string& order_words) {
  Hypothesis h;
  h.code = "narrow_accumulation";
  h.tensor = tensors;
  h.side = "numeric";
  h.family = "numeric";
  h.spec = std::string("acc=") + rounding_name(r);  // one kind whatever the order that fits
  h.rank = 31;
  h.params = {{"format", rounding_name(r)}, {"order", order}};
  h.description = fmt::format("recomputed with the running sum rounded to {} after every add ({})",
                              rounding_name(r), order_words);
  h.cause = std::string("the accumulator declared as ") + rounding_name(r) +
            " (a half-precision register or variable holding the partial sum)";
  h.fix = "accumulate in float32 (or wider) and round once, when the result is stored";
  return h;
}

const char* rounding_name(Rounding r) {
  switch (r) {
    case Rounding::tf32:
      return "tf32";
    case Rounding::bfloat16:
      return "bfloat16";
    case Rounding::float16:
      return "float16";
    case Rounding::float32:
      return "float32";
    default:
      return "none";
  }
}

std::vector<Rounding> roundings_to_try(DType logical) {
  if (logical == DType::bfloat16) return {};
  if (logical == DType::float16) return {Rounding::bfloat16};
  return {Rounding::tf32, Rounding::bfloat16, Rounding::float16};
}

Hypothesis rounded_inputs_hypothesis(Rounding r, const std::string& tensors, const std::string& words,
                                     const std::string& tf32_off) {
  Hypothesis h;
  h.code = "rounded_inputs";
  h.tensor = tensors;
  h.side = "numeric";
  h.family = "numeric";
  h.spec = std::string("round=") + rounding_name(r);
  h.rank = 30;
  h.params = {{"format", rounding_name(r)}};
  h.description = fmt::format("recomputed with {} rounded to {} before the products", words, rounding_name(r));
  h.cause = r == Rounding::tf32 ? "TF32 math mode (tensor cores) on a float32 case"
                                : std::string("operands converted to ") + rounding_name(r);
  h.fix = r == Rounding::tf32 ? "turn TF32 off (" + tf32_off + "), or accept it with --policy policies/tf32.json"
                              : std::string("keep the operands in the case dtype; do not convert them to ") +
                                    rounding_name(r);
  return h;
}

float round_to_logical(double x, DType logical) {
  const float f = static_cast<float>(x);
  if (logical == DType::bfloat16) return round_as(f, Rounding::bfloat16);
  if (logical == DType::float16) return round_as(f, Rounding::float16);
  return f;
}

}  // namespace validate::compare::detail
