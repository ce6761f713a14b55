#pragma once
// Shared by the diagnosis families (diagnosis_*.cpp): reading values, the element test, samples,
// byte-reading hypotheses relative to a declared layout, and the collector of hypotheses.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "validate/diagnosis/diagnosis.hpp"
#include "validate/layout/convert.hpp"
#include "validate/ops/reference.hpp"

namespace validate::compare::detail {

float read_value(const ArrayView& v, std::int64_t i);
// Rounds to the nearest value of `t` (ties to even), as float: tf32 is float32 with a 10-bit
// mantissa (what Ampere tensor cores multiply), bfloat16 7 bits, float16 10 bits and its range.
enum class Rounding { none, tf32, bfloat16, float16, float32 };
float round_as(float x, Rounding r);
float round_to_logical(double x, DType logical);
const char* rounding_name(Rounding r);
// The operand roundings worth trying on a case of `logical` dtype: only those that change its
// values (bfloat16 values are already TF32 and float16 values; float16 values are TF32 values).
std::vector<Rounding> roundings_to_try(DType logical);
// "Your operands were rounded to R before the products" (conv2d and matmul): code rounded_inputs,
// the cause and the fix. `tensors` names them for the report ("input", "A,B"), `words` in the
// sentence ("the input and weight"), `tf32_off` how to turn TF32 off in that op's library.
Hypothesis rounded_inputs_hypothesis(Rounding r, const std::string& tensors, const std::string& words,
                                     const std::string& tf32_off);

// Accumulation in a narrow type: the running sum rounded to `r` after each add
// through float32, as a float32 add whose result is stored in a bfloat16/float16 register would
// (ops::ElementOptions::float32_adds; the op's element path does the sum). Products stay exact (a
// float times a float fits a double), so only the accumulator differs from the oracle.
// The accumulator types worth trying on a case of `logical` dtype: those narrower than float32 (a
// float32 running sum is the declared computation of every dtype, never a mistake to name).
std::vector<Rounding> accumulators_to_try(DType logical);
// code narrow_accumulation, params {format, order}; `order_words` names the summation order.
Hypothesis narrow_accumulation_hypothesis(Rounding r, const std::string& tensors,
                                          const std::string& order, const std::string& order_words);
// A narrow accumulator is an order-dependent rounding pattern: it is named only when its recompute
// agrees to the element test AND its residual is at most 1/kNarrowFactor of the clean float64
// recompute's on the same positions. Without the second rule a failure that is mere float32
// reordering noise, or a bfloat16 case whose clean recompute already sits inside the (doubled)
// recompute tolerance, would be "explained" by any accumulator.
constexpr double kNarrowFactor = 4.0;

// The gate's per-element error bound at a canonical position p: |x - r| <= 2 b(r, rho[p]) for two
// correct stacks (bounds.hpp, side_bound), which is linear in |r| and rho, so it is kept as
// per_ref |r| + per_scale rho + constant (rho = the scale's value at p times its unit; a
// non-finite rho counts as 0, as in the gate). `scaled(f)` is the bound of f times the correct
// values (a hypothesis "the run is f times the reference"): f r's own term and |f| times the rest.
struct BoundTest {
  ArrayView scale;
  double unit = 1, per_ref = 0, per_scale = 0, constant = 0;
  // A gradient held to its stored dL/dy choice (BoundOptions::choice): the gate's options, whose
  // bound at p is the smaller of the linear one and the choice's. Null once scaled.
  std::optional<BoundOptions> choice;
  static BoundTest of(const DiagnosisInput::ElementBound& b);
  // The bound at p of reference value r against value x (the choice's counts x's own rounding).
  double at(std::int64_t p, double r, double x) const;
  BoundTest scaled(double f) const;
};

// The element test of the gate (metrics.hpp), scalar. beyond(r, x) is the fixed part: atol OR
// rtol (guarded by the floor) and max_ulp, as set; beyond_at(p, r, x) adds the per-element bound
// at canonical position p when the gate has one. What stands in for the gate:
//  - the policy sets atol, rtol or max_ulp: those, and the bound as well when there is one (an
//    element must pass every test the gate sets);
//  - a bound alone (a set with scales, the default policy): the bound alone;
//  - neither (no element gate configured): a guarded relative error of 1e-2, so "agrees" still
//    means something.
struct ElementTest {
  float floor = 0, atol = 0, rtol = 0;
  std::uint64_t max_ulp = ~std::uint64_t{0};
  DType logical = DType::float32;
  std::optional<BoundTest> bound;
  bool beyond(float r, float x) const;
  bool beyond_at(std::int64_t p, float r, float x) const;
};
ElementTest gate_test(const DiagnosisInput& in);
// For recomputed values: the run has its own rounding and summation order, the float64 oracle
// another, so the gate's ULP limit cannot apply; a guarded relative error of twice the dtype's
// default gate (float32 5e-4, bfloat16 4e-2, float16 1e-2) or of the gate, whichever is larger.
ElementTest recompute_test(const DiagnosisInput& in);

struct Eval {
  double max_abs = 0;
  std::int64_t beyond = 0, checked = 0;
  // A recomputed value: the fixed test alone (recompute_test has no bound).
  void add(float r, float x, const ElementTest& t);
  // The reference value r at canonical position p against x: the gate's test, bound included.
  void add_at(std::int64_t p, float r, float x, const ElementTest& t);
};

// Whether the run, read as declared, agrees with the reference under `t` on every element (a
// sample of `sample` positions first, then every element, or 1M samples above
// in.confirm_all_limit). A hypothesis judged by the element test is named only when this is
// false: a cause is named only when the numbers rule out the declared reading.
bool declared_agrees(const DiagnosisInput& in, const ElementTest& t);

// The declared computation: the op recomputed in float64 from the inputs read as declared, at
// canonical output positions (cached: the hypotheses of one search share their sampled positions).
// A hypothesis that coincides with it on this geometry explains a correct run exactly as well as a
// wrong one, so it is never a candidate: data and filter flipped together with the output written
// flipped reproduce the declared sums in another order on a stride-1 conv with symmetric padding,
// and the numbers of such a run cannot show the "mistake" (any rounding-sized failure fits it).
// Predicted values coincide when each lies within what the gate cannot tell from the declared value
// at that position: the per-element bound of two correct stacks when the gate has one, and in any
// case 1e-12 of the largest declared value checked (the float64 sums' own summation order).
struct Predicted {
  std::int64_t at;  // the canonical output position the hypothesis predicts
  double value;     // float64, before rounding to the case dtype
};
class DeclaredRecompute {
 public:
  DeclaredRecompute(const DiagnosisInput& in, std::function<double(std::int64_t)> value);
  bool coincides(std::size_t count, const std::function<Predicted(std::size_t)>& predicted);
  double at(std::int64_t p);

 private:
  std::function<double(std::int64_t)> value_;
  std::optional<BoundTest> bound_;
  std::unordered_map<std::int64_t, double> cache_;
};
// The canonical flat position whose element `m` puts at memory offset `offset` (the inverse of
// Placement::offset_of for a dense placement).
std::int64_t canonical_at(const layout::Placement& m, std::int64_t offset);

// A failure that no hypothesis explains, over the whole tensor (diagnosis_profile.cpp): its size
// against the gate, the declared computation's bound and that bound's worst case, the error's sign
// against the reference's, its RMS per output position modulo a tile size, its tail, and its
// correlation with the element scales. JSON for the reports; profile_sentence words it ("" when the
// failure is beyond what rounding can do, which the plain "none of these" sentence covers).
nlohmann::json failure_profile(const DiagnosisInput& in);
std::string profile_sentence(const nlohmann::json& profile, const std::string& subject);
// A tile pattern is named at a spread of 2x: with at least 128 elements per class the mean |error|
// of a class of normal errors varies by about 0.76/sqrt(128) = 7% (one standard deviation), so 36
// classes of a direct sum stay within about 1.4x (measured: 1.0-1.3x, tests/diagnosis); Winograd's
// output transform weights the positions of a tile unequally (its A matrix has entries 1 to 8 for
// F(4x4,3x3)), 3-10x.
constexpr double kTileSpread = 2;
constexpr std::int64_t kTileClassMin = 128;

// Deterministic, stratified sample of flat indices (a hash jitter inside each stratum keeps the
// sample from aliasing with an axis period).
std::vector<std::int64_t> sample_positions(std::int64_t numel, std::int64_t count);
void unravel(std::int64_t flat, const Shape& shape, std::int64_t* idx);
// unravel of every position, one after another (rank indices each): a hypothesis search reads the
// same sampled positions through every candidate layout, and the divisions were a tenth of it.
std::vector<std::int64_t> unravel_all(const std::vector<std::int64_t>& flat, const Shape& shape);

// The bytes of one tensor as the program handled them: the canonical reference (or run) tensor
// converted to the layout the program declared for it. Owned copy unless the declared layout is
// the canonical one.
struct DeclaredBytes {
  ArrayView view;
  std::vector<std::byte> owned;
  layout::Placement declared;  // canonical index -> offset of the declared layout
};
DeclaredBytes declared_bytes(const ArrayView& canonical, const Shape& shape,
                             const std::string& axes, const std::string& declared_spec);

// A reading of those bytes other than the declared one ("the bytes are really X"), its code
// relative to the declared layout, and its spelling.
struct Reading {
  layout::Placement m;
  std::string spec;       // "NCWH", "OIHW+flip=HW"
  std::string perm_code;  // "", hw_swapped, fortran_order, transposed, axes_permuted
  std::string flips;      // axes whose flip differs from the declared layout ("HW", "W", "")
  int rank = 0;           // simplicity
  // Other mistakes that put the same bytes in the same places on this shape (through a size-1
  // axis: with batch 1, NCHW:F is also a C<->W swap): {code, spec}, said with the named one.
  std::vector<std::pair<std::string, std::string>> aliases;
  std::string code() const {
    return perm_code.empty() ? (flips.empty() ? "" : "flipped")
                             : perm_code + (flips.empty() ? "" : "+flipped");
  }
};
// params.same_bytes_as of a hypothesis from a reading's aliases.
void add_aliases(const Reading& rd, Hypothesis& h);
// Every distinct reading of a tensor of `shape`: the declared axis order reversed (F vs C order),
// with H and W exchanged, every other permutation; each with every subset of spatial flips.
// Readings identical to the declared one on this shape (e.g. swaps of size-1 axes) are dropped,
// and so are duplicates (the first, simplest spelling is kept).
// `declared_fortran`: the declared spec ends in ":F", so the reversed reading is spelled in C order.
std::vector<Reading> readings(const Shape& shape, const std::string& axes,
                              const layout::Placement& declared, bool declared_fortran = false);

// Evaluates a recomputed hypothesis on sampled output positions against the run, stopping at the
// first few positions beyond tolerance (a wrong hypothesis is off almost everywhere; the residual
// of the first positions is enough to rank it).
template <class Value>
Eval eval_recompute(const DiagnosisInput& in, const ElementTest& t,
                    const std::vector<std::int64_t>& positions, Value&& value) {
  Eval e;
  for (std::int64_t p : positions) {
    e.add(round_to_logical(value(p), in.logical), read_value(in.run, p), t);
    if (e.beyond > 0 && e.checked >= 4) break;
  }
  return e;
}
void finish_recompute(Hypothesis& h, const Eval& e, std::int64_t numel);
std::string spec_of(const layout::Placement& m, const std::string& axes);
// `spec` written in the notation of the declaration: for a Fortran declaration (CHWN:F) the bytes
// spec_of spells NHWC read "CWHN:F (NHWC in C order)"; unchanged when both are in one order.
// `with_other` false: the declaration's spelling alone (for a fix: "declare it as CWHN:F").
std::string in_notation_of(const std::string& spec, const std::string& declared, const std::string& axes,
                           bool with_other = true);
std::string declared_name(const DiagnosisInput& in, const std::string& tensor,
                          const std::string& axes);

// Collects hypotheses: counts them, keeps the matches and the smallest residual.
struct Search {
  Diagnosis dx;
  void family(const char* name) { dx.families.push_back(name); }
  void add(Hypothesis h);
  // A hypothesis that coincides with the declared computation (DeclaredRecompute): counted as
  // tried and recorded as such, never a match nor the closest.
  void coincident(Hypothesis h);
};

// The families (one source file each).
void search_output_side(const DiagnosisInput& in, Search& s);
void search_conv_inputs(const DiagnosisInput& in, Search& s);
void search_matmul_inputs(const DiagnosisInput& in, Search& s);
void search_conv_transpose_inputs(const DiagnosisInput& in, Search& s);
void search_loss(const DiagnosisInput& in, Search& s);
void search_gradient_scale(const DiagnosisInput& in, Search& s);
void search_gradient_accumulation(const DiagnosisInput& in, Search& s);
// conv2d and conv_transpose2d grad_input and grad_weight (diagnosis_conv_gradient_accumulation.cpp);
// search_gradient_accumulation hands them over.
void search_conv_gradient_accumulation(const DiagnosisInput& in, Search& s);

// Pairs: one read-side mistake and one write-side mistake at once (diagnosis_pairs.cpp). The
// input-side families hand over their commonest read hypotheses with a recompute function; each
// is combined with the commonest write readings of the output bytes. Searched when no read or
// arithmetic hypothesis fits alone (a write-only match does not stop it: see diagnosis_pairs.cpp).
struct ReadCandidate {
  Hypothesis h;                                  // the read-side hypothesis, as named alone
  std::function<double(std::int64_t)> value;     // float64 output at a flat canonical position
};
void search_write_pairs(const DiagnosisInput& in, Search& s, std::vector<ReadCandidate>& reads,
                        DeclaredRecompute& declared_sums);
// A match so far that is not a write-side one (side "output").
bool any_read_match(const Search& s);

// The float64 output at every position, from the canonical reference inputs, through the op's
// own reference (ops::OpDef::reference) with `opt`: by default the oracle's sums; with a narrow
// accumulation, a summation order and bias_first, "accumulated in float16, channels innermost"
// (ops::ReferenceOptions). For hypotheses that need the whole output, e.g. the loss on the
// unrounded output. False when the op's parameters or inputs are not there or the work exceeds
// in.full_forward_budget multiply-adds.
bool forward_all(const DiagnosisInput& in, const Shape& out_shape, std::vector<double>& y,
                 const ops::ReferenceOptions& opt = {});
// The reference's accumulation for a rounding of the diagnosis (none: float64).
ops::Accumulation accumulation_of(Rounding r);

// "H and W" / "W"
std::string axis_words(const std::string& letters);
// What the advice calls the run's tensor: the file the program wrote ("grad_weight.bin"), or for
// a tensor compared in memory its name, else "the tensor under test".
std::string written_name(const DiagnosisInput& in);

}  // namespace validate::compare::detail
