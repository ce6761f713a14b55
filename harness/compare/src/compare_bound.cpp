// The per-element error-bound gate of one tensor (bounds.hpp; docs/compare.md, "Error bounds").
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compare_algorithm.hpp"
#include "comparer.hpp"
#include "validate/metrics/bounds.hpp"
#include "validate/cases/refset.hpp"
#include "validate/cases/scale_check.hpp"
#include "validate/cases/scale_file.hpp"
#include "validate/core/json_io.hpp"
#include "validate/ops/registry.hpp"
#include "validate/train/tensor_names.hpp"

namespace validate::compare::detail {

namespace {

namespace stdfs = std::filesystem;

std::string g(double v) { return fmt::format("{:.4g}", v); }

// The number of products summed into an element of `tensor` (the largest, up to the border
// effects of padding and stride): the op's K for the output (+1: the bias), for a gradient of an
// operand L the op's multiply-adds shared among L's elements, numel(output) K / numel(L), and for
// the bias gradient numel(output) / numel(bias).
double reduction_length(const PairItem& it, const Entry& e, ops::Role role) {
  double out = 0, k = static_cast<double>(std::max<std::int64_t>(e.K, 1));
  for (const auto& t : it.ref->c.tensors(*it.op))
    if (t.role == ops::Role::output) out = static_cast<double>(shape_numel(t.shape));
  if (role == ops::Role::output) return k + 1;
  const double mine = static_cast<double>(std::max<std::int64_t>(shape_numel(e.shape), 1));
  if (it.tensor == "grad_bias") return std::max(1.0, std::ceil(out / mine));
  return std::max(1.0, std::ceil(out * k / mine));
}

}  // namespace

// max |bias| of the reference set's bias input of this op (0 when it has none): an output may be
// stored in the case dtype before its bias is added (bounds.hpp, BoundOptions::added_after).
Result<double> bias_magnitude(const PairItem& it, const std::string& op) {
  const Json* f = find_path(it.ref->metadata, {"ops", op.c_str(), "tensors", "bias", "file"});
  const Json* role = find_path(it.ref->metadata, {"ops", op.c_str(), "tensors", "bias", "role"});
  if (!f || !f->is_string() || !role || !role->is_string() || role->get<std::string>() != "input") return 0.0;
  const std::string path = (stdfs::path(it.ref_file).parent_path() / f->get<std::string>()).string();
  auto m = open_npy(path);
  if (!m) return Error{"reference: bias: " + m.message()};
  const ArrayView v = m->view();
  double most = 0;
  for (std::int64_t i = 0; i < v.numel; ++i) {
    const double b = std::fabs(static_cast<double>(value_at(v, i)));
    if (std::isfinite(b)) most = std::max(most, b);
  }
  return most;
}

Result<BoundOptions> bound_options(const PairItem& it, const Entry& e, ops::Role role, const Gates& gt) {
  BoundOptions o;
  o.dtype = it.ref->c.dtype;
  o.gradient = role == ops::Role::grad;
  o.n = reduction_length(it, e, role);
  o.lambda = *gt.bound;
  o.per_lambda = role == ops::Role::checkpoint;  // a checkpoint's scale is its bound per lambda
  if (gt.operand_bits) o.operand_u = std::ldexp(1.0, -static_cast<int>(*gt.operand_bits));  // TF32 on purpose
  if (role == ops::Role::output) {
    auto b = bias_magnitude(it, e.op_name());
    if (!b) return b.status();
    o.added_after = *b;
  }
  return o;
}

namespace {

// scale_limits reads the op's inputs and output, which every scale of the op shares: read once per
// op (the largest im2col A was read three times). The key holds the metadata's hashes of the op's
// tensors, so a set rewritten between two compares in one process is read again.
Result<std::map<std::string, cases::ScaleLimit>> op_scale_limits(const PairItem& it, ops::Op op) {
  std::string key = it.ref->dtype_dir + "/" + it.ref->c.name + "/" + ops::op_name(op);
  if (const Json* ts = find_path(it.ref->metadata, {"ops", ops::op_name(op), "tensors"}); ts && ts->is_object())
    for (const auto& [name, t] : ts->items())
      if (t.is_object() && t.contains("sha256") && t["sha256"].is_string())
        key += "|" + name + "=" + t["sha256"].get<std::string>();
  static std::mutex mu;
  static std::map<std::string, std::map<std::string, cases::ScaleLimit>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto hit = cache.find(key); hit != cache.end()) return hit->second;
  }
  auto limits = cases::scale_limits(*it.ref, op);
  if (limits) {
    std::lock_guard<std::mutex> lock(mu);
    cache.emplace(key, *limits);
  }
  return limits;
}

// A scale compare would widen or narrow every bound with: finite, >= 0, at most the ceiling the
// case's own inputs allow and at least the floor its reference element puts under it
// (cases/scale_check.hpp). Anything else is an invalid reference set (exit 2), never a verdict.
Status check_scale_plausible(const PairItem& it, const std::string& op, const std::string& tensor,
                             const std::string& file, const Mapped& scale, double unit, const Mapped* mapped_ref) {
  const ops::OpDef* def = ops::find(op);
  if (!def) return Status::ok();
  auto limits = op_scale_limits(it, def->id());
  if (!limits) return Error{"reference: error-bound scale " + file + ": " + limits.message()};
  const auto lim = limits->find(tensor);
  const std::string ref_file = it.ref->dtype_dir + "/" + it.ref->c.file_name(def->id(), tensor);
  Result<Mapped> opened = Mapped{};
  if (!mapped_ref || mapped_ref->file.path() != ref_file) opened = open_npy(ref_file);
  if (!opened) return Error{"reference: " + opened.message()};
  const Mapped* ref = mapped_ref && mapped_ref->file.path() == ref_file ? mapped_ref : &*opened;
  const ArrayView sv = scale.view(), rv = ref->view();
  const std::string bad = cases::check_scale_values(
      {sv.data, sv.storage, sv.numel}, unit,
      ref->header.shape == scale.header.shape ? cases::StoredValues{rv.data, rv.storage, rv.numel} : cases::StoredValues{},
      lim != limits->end() ? lim->second : cases::ScaleLimit{});
  if (bad.empty()) return Status::ok();
  return Error{fmt::format("reference: invalid error-bound scale {} ({}'s metadata, ops.{}.scales.{}): {}; the "
                           "reference set is invalid (validate verify names every such scale)",
                           file, it.ref->c.name, op, tensor, bad)};
}

}  // namespace

Result<std::optional<ScaleFile>> open_scale(const PairItem& it, const std::string& op, const std::string& tensor,
                                            const Shape& shape, const std::vector<std::string>& quantities,
                                            const Mapped* mapped_ref) {
  const Json* entry = find_path(it.ref->metadata, {"ops", op.c_str(), "scales", tensor.c_str()});
  const Json* sf = entry ? find_path(*entry, {"file"}) : nullptr;
  if (!sf || !sf->is_string()) return std::optional<ScaleFile>();
  const Json* sq = find_path(*entry, {"quantity"});
  if (!(sq && sq->is_string() &&
        std::find(quantities.begin(), quantities.end(), sq->get<std::string>()) != quantities.end()))
    return Error{fmt::format("reference: the error-bound scale of {} is not listed as \"{}\" in {}'s metadata "
                             "(ops.{}.scales.{}.quantity)",
                             tensor, fmt::join(quantities, "\" or \""), it.ref->c.name, op, tensor)};
  const std::string f = (stdfs::path(it.ref_file).parent_path() / sf->get<std::string>()).string();
  auto sm = open_npy(f);
  if (!sm) return Error{"reference: error-bound scale: " + sm.message()};
  const DType dt = sm->header.dtype;
  if (sm->header.shape != shape || (dt != DType::float32 && dt != DType::float16))
    return Error{fmt::format("reference: error-bound scale {} has shape {} ({}), expected float16 or float32 {}", f,
                             shape_to_string(sm->header.shape), dtype_name(dt), shape_to_string(shape))};
  auto unit = cases::scale_unit(*entry, dt, fmt::format("reference: {}'s metadata, ops.{}.scales.{} ({})",
                                                        it.ref->c.name, op, tensor, f));
  if (!unit) return unit.status();
  VALIDATE_TRY(check_scale_plausible(it, op, tensor, f, *sm, *unit, mapped_ref));
  return std::optional<ScaleFile>(ScaleFile{std::move(*sm), *unit, sq->get<std::string>()});
}

Result<std::optional<ScaleFile>> open_choice(const PairItem& it, const std::string& op, const std::string& tensor,
                                             const Shape& shape, ops::Role role) {
  const Json* entry = find_path(it.ref->metadata, {"ops", op.c_str(), "scales", tensor.c_str(), "choice"});
  if (!entry) return std::optional<ScaleFile>();
  const bool output = role == ops::Role::output;
  const char* quantity = output ? cases::kBiasAfterQuantity : cases::kChoiceQuantity;
  const char* what = output ? "bias-after term" : "dL/dy choice term";
  const std::string where = fmt::format("reference: {}'s metadata, ops.{}.scales.{}.choice", it.ref->c.name, op, tensor);
  const Json* sf = find_path(*entry, {"file"});
  const Json* sq = find_path(*entry, {"quantity"});
  if (!sf || !sf->is_string() || !sq || !sq->is_string() || sq->get<std::string>() != quantity)
    return Error{fmt::format("{}: needs \"file\" and \"quantity\": \"{}\"", where, quantity)};
  const std::string f = (stdfs::path(it.ref_file).parent_path() / sf->get<std::string>()).string();
  auto m = open_npy(f);
  if (!m) return Error{fmt::format("reference: {}: {}", what, m.message())};
  const DType dt = m->header.dtype;
  if (m->header.shape != shape || (dt != DType::float32 && dt != DType::float16))
    return Error{fmt::format("reference: {} {} has shape {} ({}), expected float16 or float32 {}", what, f,
                             shape_to_string(m->header.shape), dtype_name(dt), shape_to_string(shape))};
  auto unit = cases::scale_unit(*entry, dt, where + " (" + f + ")");
  if (!unit) return unit.status();
  return std::optional<ScaleFile>(ScaleFile{std::move(*m), *unit, quantity});
}

bool stored_choice_applies(const Entry& e, const AlgorithmBound& alg, const BoundOptions& o) {
  if (o.operand_u != 0) return false;
  if (e.role == ops::Role::grad) return !alg.carried_output;
  // An output's bias-after flips were bounded at lambda 8 with the direct sum's error.
  return e.role == ops::Role::output && o.added_after > 0 && alg.extra.empty() && o.lambda <= kStoredChoiceLambda;
}

void set_stored_term(ops::Role role, const ArrayView& stored, double unit, BoundOptions& o) {
  if (role == ops::Role::output) o.after = &stored, o.after_unit = unit;
  else o.choice = &stored, o.choice_unit = unit;
}

void use_stored_choice(Entry& e, const ArrayView& stored, double unit, BoundOptions& o) {
  set_stored_term(*e.role, stored, unit, o);
  e.bound_model += e.role == ops::Role::output ? kBiasAfterModelSuffix : kChoiceModelSuffix;
  e.bound_used_choice = true;
}

Result<BoundOptions> scale_bound_options(const PairItem& it, const Entry& e, const ScaleFile& scale, const Gates& gt) {
  auto opts = bound_options(it, e, *e.role, gt);
  if (!opts) return opts;
  opts->scale_unit = scale.unit;
  opts->split_gradient = scale.quantity == cases::kGradientBoundQuantity;
  return opts;
}

namespace {

// Whether two option sets agree on everything the rounding-bias estimate reads of them (the
// allowance's dtype and operand rounding, the accumulation's n and scale unit).
bool same_bias_inputs(const BoundOptions& a, const BoundOptions& b) {
  return a.dtype == b.dtype && a.operand_u == b.operand_u && a.n == b.n && a.scale_unit == b.scale_unit;
}

}  // namespace

std::optional<PendingBias> Comparer::start_bias(const PairItem& it, const Entry& e, const Mapped& ref,
                                                const Mapped& run, const ScaleFile& scale, const Gates& gt) {
  if (e.role != ops::Role::output && e.role != ops::Role::grad) return std::nullopt;
  auto opts = scale_bound_options(it, e, scale, gt);
  if (!opts) return std::nullopt;
  return PendingBias{*opts, start_rounding_bias_check(it, e, ref.view(), run.view(), scale.map.view(), *opts)};
}

std::optional<Diagnosis> Comparer::check_error_bound(const PairItem& it, Entry& e, const Mapped& ref,
                                                     const Mapped& run, const ScaleFile& scale,
                                                     const Gates& gt, GateResult& gr, PendingBias* pending) {
  auto opts = scale_bound_options(it, e, scale, gt);
  if (!opts) {
    invalid(e, opts.message());
    return std::nullopt;
  }
  BoundOptions o = *opts;
  auto alg = algorithm_bound(it, e, o.lambda, opt_.threads);  // the run's algorithm: its own term, if any
  if (!alg) {
    invalid(e, alg.message());
    return std::nullopt;
  }
  e.algorithm = alg->algorithm, e.bound_model = alg->model;
  if (!alg->extra.empty()) o.run_extra = alg->extra.data();
  // Three-way: with an oracle, the run is held to its own bound against the exact value.
  auto exact = open_oracle(it, e);
  if (!exact) {
    invalid(e, exact.message());
    return std::nullopt;
  }
  const ArrayView xv = *exact ? (*exact)->view(false) : ArrayView{};
  // A bfloat16/float16 gradient's stored dL/dy choice, or an output's stored bias-after term: only
  // where their flips were bounded for this run, a direct-sum output on unrounded operands
  // (BoundOptions::choice, BoundOptions::after).
  std::optional<ScaleFile> choice;
  if (stored_choice_applies(e, *alg, o)) {
    auto ch = open_choice(it, e.op_name(), it.tensor, e.shape, *e.role);
    if (!ch) {
      invalid(e, ch.message());
      return std::nullopt;
    }
    choice = std::move(*ch);
  }
  const ArrayView cv = choice ? choice->map.view() : ArrayView{};
  if (choice) use_stored_choice(e, cv, choice->unit, o);
  // The rounding-bias estimate is one pass over the tensor in a fixed order (its figures are defined
  // by that order), one core's work: started beside the metrics when it could be, else beside the
  // bound pass.
  std::future<RoundingBiasCheck> bias_pass;
  const bool started = pending && same_bias_inputs(pending->o, o);
  if (!started) bias_pass = start_rounding_bias_check(it, e, ref.view(), run.view(), scale.map.view(), o);
  auto r = check_bounds(ref.view(), run.view(), scale.map.view(), *exact ? &xv : nullptr, o, 5, opt_.threads);
  const RoundingBiasCheck bias = started ? pending->result.get() : bias_pass.get();
  if (!r) {
    invalid(e, it.run_file + ": " + r.message());
    return std::nullopt;
  }
  gr.checks.push_back(Check{"error_bound", r->max_over, 1.0, true, r->beyond == 0});
  add_rounding_bias(bias, gr);
  if (r->beyond == 0) return std::nullopt;

  std::string list;
  for (std::size_t i = 0; i < r->worst.size() && i < 3; ++i) {
    const BoundElement& el = r->worst[i];
    list += fmt::format("{}at {}: ref {}, run {}", i ? "; " : "", format_coords(el.index, e.shape, e.axes),
                        g(el.ref), g(el.run));
    if (el.exact)
      list += fmt::format(", exact {} (|run - exact| {}, |ref - exact| {})", g(*el.exact),
                          g(std::fabs(el.run - *el.exact)), g(std::fabs(el.ref - *el.exact)));
    list += fmt::format(", bound {} ({:.3g}x over, {} ULP)", g(el.bound), el.over, el.ulp);
  }
  const auto cp = train::parse_checkpoint_tensor(it.tensor);
  const std::string what =
      o.per_lambda && cp ? fmt::format("the trajectory's error bound (lambda {}, every gradient's rounding over {} "
                                       "step(s) carried through the optimizer",
                                       g(o.lambda), cp->step)
                         : fmt::format("the error bound (lambda {}, {} products per element", g(o.lambda), g(o.n));
  gr.reasons.push_back(fmt::format("{} of {} elements beyond {}{}); {}", r->beyond, r->checked, what,
                                   r->against_exact ? ", run against the oracle's exact values" : "", list));

  // A rounding-sized disagreement: every element within the worst case of rounding in the declared
  // sums (gamma_n (|y| + sqrt(n) rho) + ..., the most any summation order can do: BoundResult's
  // max_worst_case_over), the failing ones at most 0.1% of the tensor. The bound and the dtype set
  // the size, not a count of ULPs (16 float32 ULPs are far inside a K = 72 bound; 16 bfloat16 ULPs
  // are 6%). A layout mistake moves nearly every element by about its own size, so no layout
  // hypothesis is offered for this (its residual would explain nothing).
  // A gradient held to its stored dL/dy choice is beyond what the declared computation can do
  // wherever it fails (the noise model's worst case says nothing there): never rounding-sized.
  if (o.choice || r->max_worst_case_over > 1 || r->beyond * 1000 > std::max<std::int64_t>(r->checked, 1))
    return std::nullopt;
  // Arithmetic narrower than declared can be that small too (a bfloat16 running sum over a short
  // reduction, TF32 operands at a small K): it is named when it reproduces the run and the declared
  // computation does not.
  if (opt_.diagnose && (e.role == ops::Role::output || e.role == ops::Role::grad)) {
    Diagnosis numeric = run_diagnosis(it, e, ref, run, gt, e.stats ? e.stats->near_zero_floor : 0, &scale, true);
    if (numeric.named()) return numeric;
  }
  Diagnosis dx;
  std::string nearer;
  if (r->against_exact)
    nearer = r->ref_nearer == r->beyond
                 ? "; at each of them the reference is nearer the exact value than the run"
                 : fmt::format("; the reference is nearer the exact value at {} of them, the run at {}",
                               r->ref_nearer, r->beyond - r->ref_nearer);
  else
    nearer = "; compare with --oracle to see which side is nearer the exact value";
  dx.summary = fmt::format(
      "no layout or precision mistake explains this: {} element(s) ({:.2g}% of the tensor) up to {:.3g}x their "
      "error bound ({} ULP of {}), within the worst case of rounding in the declared sums (at most {:.2g}x it) — "
      "rounding-sized, consistent with another summation algorithm (Winograd, FFT: a run can declare it, "
      "docs/runners.md) or a gate tighter than the computation allows{}",
      r->beyond, 100.0 * static_cast<double>(r->beyond) / static_cast<double>(std::max<std::int64_t>(r->checked, 1)),
      r->max_over, r->max_failing_ulp, dtype_name(o.dtype), r->max_worst_case_over, nearer);
  dx.families.push_back("precision");
  return dx;
}

}  // namespace validate::compare::detail
