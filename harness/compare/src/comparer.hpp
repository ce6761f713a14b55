#pragma once
// The comparison of a reference set with a run, in named steps (compare_sets in compare.cpp):
//   compare.cpp            load, pair, evaluate each item, the whole-report refinements
//   compare_tensor.cpp     one tensor: shape, run manifest, metrics, gates, verdict
//   compare_loss.cpp       the 0-d loss: loss gates, rounding check, loss diagnosis
//   compare_oracle.cpp     three-way mode: which side is closer to the float64 oracle
//   compare_diagnosis.cpp  the diagnosis input: declared layouts and the op's reference tensors
//   mapped_npy.cpp         memory-mapped .npy files and scalar reads
//   tensor_gates.cpp       check_tensor_gates: the gate checks and the sentence for each failure
// Internal to validate_compare: nothing here is installed.
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "validate/compare/compare.hpp"
#include "validate/diagnosis/diagnosis_loss_check.hpp"
#include "validate/compare/pairing.hpp"
#include "validate/train/trajectory_check.hpp"
#include "validate/core/mapped_file.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/pattern.hpp"
#include "validate/metrics/bounds.hpp"
#include "validate/metrics/rounding_bias.hpp"
#include "run_hasher.hpp"

namespace validate::compare::detail {

// A memory-mapped .npy: the map (read front to back, so the kernel reads ahead) and its header.
struct Mapped {
  MappedFile file;
  npy::Header header;
  ArrayView view(bool round = false) const {
    return ArrayView{file.data() + header.data_offset, header.dtype, shape_numel(header.shape),
                     round};
  }
};

// A C-order .npy (Fortran order is refused: reference and run tensors are canonical).
Result<Mapped> open_npy(const std::string& path);
// The same of a file already mapped (and advised): errors name mapped.path().
Result<Mapped> open_npy(MappedFile mapped);
// Element 0 / element i of a float64, float16 or 4-byte view, as float (NaN for an empty view).
float scalar_value(const ArrayView& v);
float value_at(const ArrayView& v, std::int64_t i);

// max |bias| of the reference set's bias input of `op` (0 when it has none): an output may be stored
// in the case dtype before its bias is added (bounds.hpp, BoundOptions::added_after).
Result<double> bias_magnitude(const PairItem& it, const std::string& op);
// The error-bound options of `e`'s op for a tensor of `role` (an output's serve its loss too): the
// case dtype, the reduction length, the policy's lambda and operand_bits, and an output's bias.
Result<BoundOptions> bound_options(const PairItem& it, const Entry& e, ops::Role role, const Gates& gt);

// The reference set's error-bound scale of `tensor` (ops.<op>.scales.<tensor> of the case's
// metadata): the mapped file and the unit its values are in (docs/formats.md, "scales"). nullopt
// when the set lists none (made before scales existed); an error naming the file when the entry
// or the file is unusable: a quantity not among `quantities`, another shape, another storage.
struct ScaleFile {
  Mapped map;
  double unit = 1;  // scale = stored value * unit
  std::string quantity;
};
// `mapped_ref`: the tensor's reference when the caller has it mapped already (read in place, not
// mapped again, when it is that file).
Result<std::optional<ScaleFile>> open_scale(const PairItem& it, const std::string& op, const std::string& tensor,
                                            const Shape& shape, const std::vector<std::string>& quantities,
                                            const Mapped* mapped_ref = nullptr);
// The end of an entry's bound model (as reports print it) when its gate used the stored dL/dy
// choice, or an output's stored bias-after term.
inline const std::string kChoiceModelSuffix = " + dL/dy's rounding, stored";
inline const std::string kBiasAfterModelSuffix = " + the bias added after, stored";
// The lambda generate bounds an output's bias-after flips at (torch_scales.cpp); a larger `bound`
// keeps the noise model's term for that route.
inline constexpr double kStoredChoiceLambda = 8;
// A bfloat16/float16 gradient's stored dL/dy choice term, or an output's stored bias-after term
// (`role`), ops.<op>.scales.<tensor>.choice: nullopt when the set lists none; an error naming the
// file when the entry or the file is unusable.
Result<std::optional<ScaleFile>> open_choice(const PairItem& it, const std::string& op, const std::string& tensor,
                                             const Shape& shape, ops::Role role);
struct AlgorithmBound;
// Whether the gate of `e` takes its stored term (open_choice): a gradient whose output is the
// direct sum's, an output with a bias whose run declares the direct sum (or split-K) at lambda <= 8,
// neither with rounded operands.
bool stored_choice_applies(const Entry& e, const AlgorithmBound& alg, const BoundOptions& o);
// Puts the stored term of a tensor of `role` into `o`: an output's as BoundOptions::after, a
// gradient's as BoundOptions::choice.
void set_stored_term(ops::Role role, const ArrayView& stored, double unit, BoundOptions& o);
// The same for `e`'s gate, and names the term in e's bound model.
void use_stored_choice(Entry& e, const ArrayView& stored, double unit, BoundOptions& o);
// The options of `e`'s error-bound gate with its scale (bound_options, the scale's unit, and a
// gradient scale split into its two parts when its quantity says so): what check_bounds and the
// diagnosis's element test are given.
Result<BoundOptions> scale_bound_options(const PairItem& it, const Entry& e, const ScaleFile& scale, const Gates& gt);

// The rounding-bias check (compare_bias.cpp) of an output or a gradient, in two steps: the estimate
// (a pass over the tensor, safe to run beside the error-bound pass), then its check added to `gr`,
// with its sentence when the tensor leans toward or away from zero beyond what correct stacks may
// share.
struct RoundingBiasCheck {
  std::optional<RoundingBias> estimate;
  double allowed = 0;
};
// The estimate, on a thread of its own: its sums are in a fixed order, one core's work for as long
// as the metric and bound passes take on all of them. `it` and the three views must outlive the
// result; what it needs of `e` is copied.
std::future<RoundingBiasCheck> start_rounding_bias_check(const PairItem& it, const Entry& e, const ArrayView& ref,
                                                         const ArrayView& run, const ArrayView& scale,
                                                         const BoundOptions& o);
void add_rounding_bias(const RoundingBiasCheck& check, GateResult& gr);
// An estimate started before the tensor's metrics, with the options it was started with (the
// error-bound check takes it when its own options agree on what the estimate reads of them).
struct PendingBias {
  BoundOptions o;
  std::future<RoundingBiasCheck> result;
};

class Comparer {
 public:
  Comparer(const CompareOptions& opt, Report& report) : opt_(opt), report_(report) {}
  Status run();

 private:
  static bool matches(const Pattern& re, const PairItem& it);
  // Error (exit 2) when `run` has cases and none of them is in the reference set.
  Status check_belongs(const RunDirectory& run) const;
  // One warning per op whose results the run read without the layout file naming them, for `who`
  // (the run directory or "variant X").
  static std::vector<std::string> unnamed_result_warnings(const RunDirectory& run, const std::string& who);
  std::string repro(const Entry& e, const std::string& label) const;
  Entry evaluate(const RunDirectory& run, const PairItem& it);
  void invalid(Entry& e, const std::string& msg);
  // compare_tensor's steps. Those returning bool return false when they have given `e` its verdict.
  void compare_tensor(const RunDirectory& run, const PairItem& it, Entry& e);
  // digest: SHA-256 of run_arr's bytes when the hasher made it (else they are hashed here).
  bool check_run_file(const RunDirectory& run, const PairItem& it, const Mapped& ref, const Mapped& run_arr,
                      const std::string* digest, Entry& e);
  void compare_loss_curve(const PairItem& it, const Mapped& ref, const Mapped& run_arr, DType logical, Entry& e);
  // Sets `scale` when the set has one for the tensor's bound gate; else moves the gates to the
  // fixed rtol, with the report's note.
  bool open_bound_scale(const PairItem& it, Entry& e, const Mapped& ref, std::optional<ScaleFile>& scale);
  void compare_scalar(const PairItem& it, const Mapped& ref, const Mapped& run_arr, const Gates& gt, Entry& e);
  void fail_shape_mismatch(const PairItem& it, const Mapped& ref, const Mapped& run_arr, const Gates& gt,
                           const ScaleFile* bound_scale, Entry& e);
  // e.stats and e.worst_coords; invalid when the reference cannot be judged against.
  bool compute_tensor_metrics(const PairItem& it, const Mapped& ref, const Mapped& run_arr, const Gates& gt,
                              DType logical, Entry& e);
  void add_checkpoint_checks(const PairItem& it, const Gates& gt, GateResult& gr,
                             std::optional<Diagnosis>& named_diagnosis);
  // passed, failed (with its diagnosis) or mistrusted, from the gates' result and e.stats.
  void decide_verdict(const PairItem& it, const Mapped& ref, const Mapped& run_arr, const Gates& gt,
                      const GateResult& gr, std::optional<Diagnosis> named_diagnosis, const ScaleFile* bound_scale,
                      bool has_scale, Entry& e);
  CheckpointDiagnosisInput checkpoint_context(const PairItem& it, const Gates& gt) const;
  void compare_loss(const PairItem& it, const Mapped& ref, const Mapped& run, const Gates& gt,
                    Entry& e);
  static std::string closer(const OracleComparison& oc);
  // Error (exit 2) unless the oracle is the oracle backend's run of the reference's inputs and is
  // neither the run being judged (any of `runs`) nor a byte-identical copy of it.
  Status check_oracle(const std::vector<RunDirectory>& runs) const;
  // The oracle's file of `e`, checked against the oracle's manifest, its element count and for NaN
  // (an error: the entry is invalid); nullopt, recorded for the report's warning, when the oracle
  // does not cover `e` or its file is the run's own bytes.
  Result<std::optional<Mapped>> open_oracle(const PairItem& it, const Entry& e);
  // "" when the oracle covered every tensor it was asked for; else the warning naming those it did not.
  std::string oracle_uncovered_warning() const;
  // The per-element error-bound gate (bounds.hpp), against the oracle when one is given; adds its
  // check and reason to `gr`. When the failure is rounding-sized (every element within the worst
  // case of rounding, a tiny fraction over the bound: no layout mistake is that small), returns
  // the narrow arithmetic that reproduces it if one does, else says it is rounding-sized.
  std::optional<Diagnosis> check_error_bound(const PairItem& it, Entry& e, const Mapped& ref,
                                             const Mapped& run, const ScaleFile& scale,
                                             const Gates& gt, GateResult& gr, PendingBias* pending);
  // The rounding-bias estimate of a bound-gated output or gradient, started now (nullopt when its
  // options cannot be formed here: the error-bound check then reports why, as before).
  std::optional<PendingBias> start_bias(const PairItem& it, const Entry& e, const Mapped& ref, const Mapped& run,
                                        const ScaleFile& scale, const Gates& gt);
  void compare_oracle(const PairItem& it, Entry& e, const Mapped& ref, const Mapped& run,
                      DType logical);
  // `scale`: the tensor's error-bound scale when its gate is the bound (nullptr otherwise); the
  // hypotheses are then held to the same per-element bound (DiagnosisInput::bound).
  // rounding_sized: only the arithmetic that moves values by rounding-sized amounts is searched
  // (DiagnosisInput::rounding_sized).
  Diagnosis run_diagnosis(const PairItem& it, const Entry& e, const Mapped& ref, const Mapped& run,
                          const Gates& gt, double floor, const ScaleFile* scale, bool rounding_sized = false);
  // The layouts the run declared for every tensor of the op (what the program was handed / wrote).
  static void declared_layouts(const PairItem& it, DiagnosisInput& in);
  // The op's reference inputs (target included), its reference output and geometry.
  static void add_reference_tensors(const PairItem& it, DiagnosisInput& in,
                                    std::vector<Mapped>& keep);
  std::optional<LossRoundingCheck> loss_rounding_check(const PairItem& it, const LossStats& l);
  Diagnosis loss_diagnosis(const PairItem& it, const Entry& e, const Mapped& ref, const Mapped& run,
                           const Gates& gt, const LossStats& l);

  const CompareOptions& opt_;
  Report& report_;
  std::vector<cases::RefCase> ref_;
  std::optional<RunDirectory> oracle_;
  const RunDirectory* current_run_ = nullptr;        // the run (or variant) being evaluated
  std::unique_ptr<RunHasher> hasher_;                // the run tensors, mapped and hashed ahead
  std::set<std::string> oracle_verified_;            // oracle files already hashed and scanned
  std::map<std::string, std::string> oracle_uncovered_;  // entry id -> why the oracle has no value
};

}  // namespace validate::compare::detail
