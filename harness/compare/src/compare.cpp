#include "validate/compare/compare.hpp"
#include "validate/compare/self_check.hpp"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <optional>
#include <regex>
#include <type_traits>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "validate/compare/diagnosis_loss_check.hpp"
#include "validate/compare/diagnosis_op.hpp"
#include "validate/compare/pairing.hpp"
#include "validate/compare/trajectory_check.hpp"
#include "validate/compare/ulp.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/mapped_file.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/sha256.hpp"
#include "validate/core/shell_quote.hpp"
#include "validate/core/version.hpp"
#include "validate/ops/registry.hpp"

namespace validate::compare {

namespace stdfs = std::filesystem;

namespace {

// A memory-mapped .npy: the map (read front to back, so the kernel reads ahead) and its header.
struct Mapped {
  MappedFile file;
  npy::Header header;
  ArrayView view(bool round = false) const {
    return ArrayView{file.data() + header.data_offset, header.dtype, shape_numel(header.shape),
                     round};
  }
};

Result<Mapped> open_npy(const std::string& path) {
  auto f = MappedFile::open(path);
  if (!f) return f.status();
  auto h = npy::parse_header(f->data(), f->size(), path);
  if (!h) return h.status();
  if (h->fortran_order && h->shape.size() > 1)
    return Error{
        path +
        ": stored in Fortran order; reference and run tensors must be C order (canonical layout)"};
  f->advise_sequential();
  return Mapped{std::move(*f), std::move(*h)};
}

std::string g(double v) { return fmt::format("{:.3g}", v); }

float scalar_value(const ArrayView& v) {
  if (v.numel < 1) return std::numeric_limits<float>::quiet_NaN();
  if (v.storage == DType::float64) {
    double d;
    std::memcpy(&d, v.data, 8);
    return static_cast<float>(d);
  }
  if (v.storage == DType::float16) {
    std::uint16_t h;
    std::memcpy(&h, v.data, 2);
    return float16_bits_to_float(h);
  }
  float f;
  std::memcpy(&f, v.data, 4);
  return f;
}

float value_at(const ArrayView& v, std::int64_t i) {
  ArrayView one = v;
  one.data = v.data + i * static_cast<std::int64_t>(dtype_size(v.storage));
  one.numel = 1;
  return scalar_value(one);
}

class Comparer {
 public:
  Comparer(const CompareOptions& opt, Report& report) : opt_(opt), report_(report) {}

  Status run() {
    auto t0 = std::chrono::steady_clock::now();
    std::optional<std::regex> only, variant;
    try {
      if (!opt_.only.empty()) only.emplace(opt_.only, std::regex::ECMAScript);
      if (!opt_.variant.empty()) variant.emplace(opt_.variant, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return Error{"--only/--variant: not a valid regular expression (" + std::string(e.what()) +
                   ")"};
    }
    auto ref_manifest = cases::read_manifest(opt_.ref_dir);
    if (!ref_manifest) return Error{"reference set " + ref_manifest.message()};
    auto ref = cases::load_cases(opt_.ref_dir);
    if (!ref) return ref.status();
    ref_ = std::move(*ref);
    auto runs = load_run(opt_.run_dir);
    if (!runs) return runs.status();
    if (!opt_.oracle_dir.empty()) {
      auto o = load_run_directory(opt_.oracle_dir, "oracle");
      if (!o) return Error{"oracle: " + o.message()};
      oracle_ = std::move(*o);
    }
    report_.require_all = opt_.require_all;
    report_.ref_dir = opt_.ref_dir;
    report_.run_dir = opt_.run_dir;
    report_.oracle_dir = opt_.oracle_dir;
    report_.policy = opt_.policy.to_json();
    report_.created_at = utc_timestamp();
    report_.harness_version = harness_version();
    report_.git_commit = harness_git_commit();
    report_.kernel_isa = metrics_kernel_isa();
    if (!runs->empty()) report_.run_info = runs->front().run_info;
    report_.self_check = same_stack_reason(opt_.ref_dir, report_.run_info);
    if (auto mh = sha256_file((stdfs::path(opt_.ref_dir) / "manifest.json").string())) {
      for (const auto& r : *runs) {
        const Json* rh = find_path(r.run_info, {"reference", "manifest_sha256"});
        if (rh && rh->is_string() && !rh->get<std::string>().empty() &&
            rh->get<std::string>() != *mh)
          report_.warnings.push_back(fmt::format(
              "{} was made from a reference whose manifest differs from {}/manifest.json",
              r.label.empty() ? opt_.run_dir : "variant " + r.label, opt_.ref_dir));
      }
    }
    for (const auto& r : *runs) {
      if (variant && !std::regex_search(r.label, *variant)) continue;
      report_.variants.push_back(r.label);
      for (const auto& item : pair_run(ref_, r)) {
        if (only && !matches(*only, item)) continue;
        Entry e = evaluate(r, item);
        if (opt_.on_entry) opt_.on_entry(e);
        report_.entries.push_back(std::move(e));
      }
    }
    for (const auto& r : opt_.policy.unmatched_rules())
      report_.warnings.push_back("policy rule " + r + " matched no tensor of the compared sets: it gates nothing");
    if (opt_.diagnose) refine_op_diagnoses(report_.entries);  // issue 12: the op's entries together
    refine_trajectories(report_.entries, report_.warnings);   // issue 15: the trajectory verdicts
    report_.elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return Status::ok();
  }

 private:
  static bool matches(const std::regex& re, const PairItem& it) {
    const std::string base = it.dtype + "/" + it.case_name + (it.op ? "/" + std::string(cases::op_name(*it.op)) : "");
    if (std::regex_search(it.tensor.empty() ? base : base + "/" + it.tensor, re)) return true;
    if (it.kind == PairItem::Kind::op_outcome &&
        it.ref) {  // an op-level entry stands for all its tensors
      for (const auto& t : it.ref->c.tensors(*it.op))
        if (std::regex_search(base + "/" + t.name, re)) return true;
    }
    return false;
  }

  std::string repro(const Entry& e, const std::string& label) const {
    std::string cmd = opt_.repro_prefix.empty() ? "validate compare " + shell_arg(opt_.ref_dir) +
                                                      " " + shell_arg(opt_.run_dir)
                                                : opt_.repro_prefix;
    auto regex_literal = [](const std::string& text) {
      std::string out;
      for (char c : text) {
        if (std::strchr(".^$|()[]{}*+?\\", c)) out += '\\';
        out += c;
      }
      return "^" + out + "$";
    };
    cmd += " --only " + shell_arg(regex_literal(e.id()));
    if (!label.empty()) cmd += " --variant " + shell_arg(regex_literal(label));
    return cmd;
  }

  Entry evaluate(const RunDirectory& run, const PairItem& it) {
    Entry e;
    e.variant = run.label;
    e.dtype = it.dtype;
    e.case_name = it.case_name;
    e.op = it.op;
    e.tensor = it.tensor;
    e.message = it.message;
    if (it.ref && it.op) {
      const std::string op = e.op_name();
      const Json* k = find_path(it.ref->metadata, {"ops", op.c_str(), "K"});
      if (k && k->is_number_integer()) e.K = k->get<std::int64_t>();
      if (!it.tensor.empty()) {
        const Json* tj =
            find_path(it.ref->metadata, {"ops", op.c_str(), "tensors", it.tensor.c_str()});
        if (tj) {
          // The one place a role is read as a name (the reference's metadata, validate-reference/1).
          e.role = ops::role_from_name(tj->value("role", std::string()));
          e.axes = tj->value("layout", std::string());
          if (e.axes == "scalar") e.axes.clear();
          if (tj->contains("shape")) e.shape = (*tj)["shape"].get<Shape>();
        }
      }
    }
    if (!e.tensor.empty() && it.kind != PairItem::Kind::tensor)
      (void)opt_.policy.resolve(TensorKey{it.dtype, *it.op, e.role, it.tensor});
    switch (it.kind) {
      case PairItem::Kind::not_run:
        e.verdict = Verdict::not_run;
        break;
      case PairItem::Kind::not_requested:
        e.verdict = Verdict::not_requested;
        break;
      case PairItem::Kind::op_outcome:
        switch (it.outcome) {
          case cases::Outcome::error: e.verdict = Verdict::error; break;
          case cases::Outcome::skipped: e.verdict = Verdict::skipped; break;
          case cases::Outcome::unsupported: e.verdict = Verdict::unsupported; break;
          case cases::Outcome::ok: e.verdict = Verdict::error; break;  // pair_run never makes one
        }
        break;
      case PairItem::Kind::input_hash:
      case PairItem::Kind::unknown:
        e.verdict = Verdict::failed;
        break;
      case PairItem::Kind::tensor:
        compare_tensor(run, it, e);
        break;
    }
    if (is_failure(e.verdict) || e.verdict == Verdict::invalid) e.repro = repro(e, run.label);
    return e;
  }

  void invalid(Entry& e, const std::string& msg) {
    e.verdict = Verdict::invalid;
    e.message = msg;
    report_.input_errors.push_back(msg);
  }

  void compare_tensor(const RunDirectory& run, const PairItem& it, Entry& e) {
    auto ref = open_npy(it.ref_file);
    if (!ref) return invalid(e, "reference: " + ref.message());
    if (!e.shape.empty() || e.role == ops::Role::loss) {
      if (ref->header.shape != e.shape)
        return invalid(
            e, fmt::format("reference: {} has shape {} but its metadata says {}", it.ref_file,
                           shape_to_string(ref->header.shape), shape_to_string(e.shape)));
    } else {
      e.shape = ref->header.shape;
    }
    if (!fs::exists(it.run_file)) {
      e.verdict = Verdict::failed;
      e.message = "declared in \"produced\" but missing: " + it.run_file;
      return;
    }
    auto run_arr = open_npy(it.run_file);
    if (!run_arr) return invalid(e, "run: " + run_arr.message());
    // The run's own manifest vouches for every file: an edited or swapped run tensor is caught
    // here even when its numbers happen to pass (issue 10).
    if (Status st = check_listed_bytes(run, it.run_rel, run_arr->file.data(), run_arr->file.size()); !st) {
      e.verdict = Verdict::failed;
      e.message = st.message();
      return;
    }
    const DType logical = it.ref->c.dtype;
    e.gates = opt_.policy.resolve(TensorKey{it.dtype, *it.op, e.role, it.tensor});
    // Training trajectories (trajectory_check.hpp): the loss curve as a curve, checkpoints with a
    // tolerance that grows with their step.
    if (e.role == ops::Role::loss_curve) {
      const std::int64_t steps = it.ref->c.train ? it.ref->c.train->steps : shape_numel(e.shape);
      if (auto bad = check_loss_curve(ref->view(), run_arr->view(), run_arr->header.shape, steps, *e.gates, e))
        return invalid(e, *bad + " (" + it.ref_file + ")");
      compare_oracle(it, e, *ref, *run_arr, logical);
      return;
    }
    if (e.role == ops::Role::checkpoint) e.gates = checkpoint_gates(*e.gates, it.tensor);
    const Gates& gt = *e.gates;

    if (e.role == ops::Role::loss || e.shape.empty()) {
      if (run_arr->header.shape != e.shape && shape_numel(run_arr->header.shape) != 1) {
        e.verdict = Verdict::failed;
        e.message = fmt::format("shape mismatch: run loss has shape {}, expected a scalar",
                                shape_to_string(run_arr->header.shape));
        return;
      }
      compare_loss(it, *ref, *run_arr, gt, e);
      return;
    }

    const Shape& rs = run_arr->header.shape;
    const bool same_shape = rs == e.shape;
    const bool same_numel = shape_numel(rs) == shape_numel(e.shape);
    if (!same_shape) {
      e.verdict = Verdict::failed;
      e.message = fmt::format("shape mismatch: run {} is {}, reference {}", it.tensor,
                              shape_to_string(rs), shape_to_string(e.shape));
      if (same_numel && opt_.diagnose) {
        auto dx = run_diagnosis(it, e, *ref, *run_arr, gt, 0.0);
        if (!dx.summary.empty()) e.diagnosis = std::move(dx);
      }
      return;
    }
    MetricOptions mo;
    mo.logical = logical;
    mo.near_zero_fraction = gt.near_zero;
    mo.atol = gt.atol;
    mo.rtol = gt.rtol;
    if (gt.max_ulp) mo.max_ulp = static_cast<std::uint64_t>(*gt.max_ulp);
    mo.threads = opt_.threads;
    if (const Json* m = find_path(it.ref->metadata,
                                  {"ops", e.op_name().c_str(), "tensors", it.tensor.c_str(), "max_abs"}))
      if (m->is_number()) mo.ref_max_abs = m->get<double>();
    auto st = compute_metrics(ref->view(), run_arr->view(), mo);
    if (!st) return invalid(e, it.run_file + ": " + st.message());
    e.stats = std::move(*st);
    const TensorStats& s = *e.stats;
    // The floor came from the metadata's max_abs: it must be the data's, or the verdict means
    // nothing (max_abs 1e30 passed a run off by 0.3 everywhere). Checked on the pass just made.
    if (mo.ref_max_abs && *mo.ref_max_abs != s.ref_max_abs_seen)
      return invalid(e, fmt::format("reference: {} has max |value| {} but its metadata records max_abs {}: the "
                                    "metadata does not describe the data (run validate verify)",
                                    it.ref_file, s.ref_max_abs_seen, *mo.ref_max_abs));
    if (s.nonfinite.nan_ref > 0)
      return invalid(e, fmt::format("reference: {} holds {} NaN value(s): a NaN reference is a broken reference, "
                                    "and nothing can be checked against it",
                                    it.ref_file, s.nonfinite.nan_ref));
    e.worst_coords = format_coords(s.worst_abs.index, e.shape, e.axes);

    GateResult gr = check_tensor_gates(s, gt, e.shape, e.axes, ref->view(), run_arr->view());
    if (e.role == ops::Role::checkpoint)  // step1_<param>: the first update itself (trajectory_check.hpp)
      if (auto u = check_first_update(checkpoint_context(it, gt))) {
        gr.checks.push_back(u->check);
        if (!u->check.passed) gr.reasons.push_back(u->reason);
      }
    e.checks = gr.checks;
    if (!gr.passed()) {
      e.verdict = Verdict::failed;
      std::string msg;
      for (const auto& w : gr.reasons) msg += (msg.empty() ? "" : "; ") + w;
      e.message = msg;
      if (opt_.diagnose && e.role == ops::Role::checkpoint) {
        e.diagnosis = diagnose_checkpoint(checkpoint_context(it, gt));
      } else if (opt_.diagnose) {
        auto dx = run_diagnosis(it, e, *ref, *run_arr, gt, s.near_zero_floor);
        e.diagnosis = std::move(dx);
      }
    } else if (s.ref_zero_fraction() > gt.mistrust_zeros) {
      e.verdict = Verdict::mistrusted;
      e.message = fmt::format(
          "{:.1f}% of the reference is exactly zero (> {:.0f}%): a stack returning zeros would "
          "pass too",
          100 * s.ref_zero_fraction(), 100 * gt.mistrust_zeros);
    } else {
      e.verdict = Verdict::passed;
    }
    compare_oracle(it, e, *ref, *run_arr, logical);
  }

  CheckpointDiagnosisInput checkpoint_context(const PairItem& it, const Gates& gt) const {
    return CheckpointDiagnosisInput{it.ref, *it.op, it.tensor, stdfs::path(it.run_file).parent_path().string(),
                                    it.run ? it.run->op(*it.op) : nullptr, gt, opt_.threads};
  }

  void compare_loss(const PairItem& it, const Mapped& ref, const Mapped& run, const Gates& gt,
                    Entry& e) {
    LossStats l;
    l.ref = scalar_value(ref.view());
    l.run = scalar_value(run.view());
    l.abs_diff = std::fabs(l.run - l.ref);
    l.rel_diff = l.ref != 0 ? l.abs_diff / std::fabs(l.ref) : (l.abs_diff == 0 ? 0 : INFINITY);
    if (std::isnan(l.ref))
      return invalid(e, "reference: " + it.ref_file +
                            " is NaN: a NaN reference loss is a broken reference, and nothing can be checked against it");
    const bool finite = std::isfinite(l.ref) && std::isfinite(l.run);
    if (finite)
      l.ulp = ulp_distance(static_cast<float>(l.ref), static_cast<float>(l.run), DType::float32);
    e.loss = l;
    std::vector<std::string> why;
    auto check = [&](const std::string& name, double value, double limit, bool upper) {
      const bool ok = upper ? value <= limit : value >= limit;
      e.checks.push_back(Check{name, value, limit, upper, ok});
      return ok;
    };
    if (!finite) {
      const bool agree = (std::isnan(l.ref) && std::isnan(l.run)) || l.ref == l.run;
      if (!check("nonfinite_mismatch", agree ? 0 : 1, 0, true))
        why.push_back(fmt::format("loss is not finite (ref {}, run {})", l.ref, l.run));
    }
    if (gt.loss_abs && finite && !check("loss_abs", l.abs_diff, *gt.loss_abs, true))
      why.push_back(
          fmt::format("loss differs by {:.3g} (> {:.3g} absolute): ref {:.9g}, run {:.9g}",
                      l.abs_diff, *gt.loss_abs, l.ref, l.run));
    if (gt.loss_rel && finite && !check("loss_rel", l.rel_diff, *gt.loss_rel, true))
      why.push_back(
          fmt::format("loss differs by {:.3g} relative (> {:.3g}): ref {:.9g}, run {:.9g}",
                      l.rel_diff, *gt.loss_rel, l.ref, l.run));
    // The loss of the output as stored, not of the unrounded one (diagnosis_loss_check.hpp).
    if (finite)
      if (auto c = loss_rounding_check(it, l))
        if (!check("loss_on_stored_output", c->ratio, LossRoundingCheck::kLimit, false))
          why.push_back(c->message);
    if (!why.empty()) {
      e.verdict = Verdict::failed;
      std::string msg;
      for (const auto& w : why) msg += (msg.empty() ? "" : "; ") + w;
      e.message = msg;
      if (opt_.diagnose && finite) e.diagnosis = loss_diagnosis(it, e, ref, run, gt, l);
    } else {
      e.verdict = Verdict::passed;
    }
    if (oracle_) {
      auto o = oracle_file(it);
      if (!o.empty()) {
        auto om = open_npy(o);
        if (om && shape_numel(om->header.shape) == 1) {
          const double ov = scalar_value(om->view());
          OracleComparison oc;
          oc.ref_max_abs = std::fabs(l.ref - ov);
          oc.run_max_abs = std::fabs(l.run - ov);
          oc.ref_max_ulp =
              ulp_distance(static_cast<float>(ov), static_cast<float>(l.ref), DType::float32);
          oc.run_max_ulp =
              ulp_distance(static_cast<float>(ov), static_cast<float>(l.run), DType::float32);
          oc.closer = closer(oc);
          e.oracle = oc;
        }
      }
    }
  }

  static std::string closer(const OracleComparison& oc) {
    const double a = oc.ref_max_abs, b = oc.run_max_abs;
    if (std::fabs(a - b) <= 0.05 * std::max(a, b)) return "tie";
    return b < a ? "run" : "reference";
  }

  std::string oracle_file(const PairItem& it) const {
    auto c = oracle_->cases.find(it.dtype + "/" + it.case_name);
    if (c == oracle_->cases.end()) return "";
    const cases::OpRunRecord* o = c->second.op(*it.op);
    if (!o || o->outcome != cases::Outcome::ok) return "";
    if (std::find(o->produced.begin(), o->produced.end(), it.tensor) == o->produced.end()) return "";
    const std::string f =
        (stdfs::path(oracle_->root) / it.dtype /
         it.ref->c.file_name(*it.op, it.tensor))
            .string();
    return fs::exists(f) ? f : "";
  }

  void compare_oracle(const PairItem& it, Entry& e, const Mapped& ref, const Mapped& run,
                      DType logical) {
    if (!oracle_) return;
    const std::string f = oracle_file(it);
    if (f.empty()) return;
    auto om = open_npy(f);
    if (!om) {
      report_.warnings.push_back("oracle: " + om.message());
      return;
    }
    if (shape_numel(om->header.shape) != shape_numel(e.shape)) {
      report_.warnings.push_back(fmt::format("oracle: {} has shape {}, expected {}", f,
                                             shape_to_string(om->header.shape),
                                             shape_to_string(e.shape)));
      return;
    }
    MetricOptions mo;
    mo.logical = logical;
    mo.threads = opt_.threads;
    // The oracle rounded to the logical dtype: the best any stack of that dtype can return.
    auto a = compute_metrics(om->view(true), ref.view(), mo);
    auto b = compute_metrics(om->view(true), run.view(), mo);
    if (!a || !b) return;
    OracleComparison oc;
    oc.ref_max_abs = a->max_abs;
    oc.run_max_abs = b->max_abs;
    oc.ref_max_ulp = a->max_ulp_any();
    oc.run_max_ulp = b->max_ulp_any();
    oc.closer = closer(oc);
    e.oracle = oc;
  }

  Diagnosis run_diagnosis(const PairItem& it, const Entry& e, const Mapped& ref, const Mapped& run,
                          const Gates& gt, double floor) {
    DiagnosisInput in;
    in.ref = ref.view();
    in.run = run.view();
    in.shape = e.shape;
    in.run_shape = run.header.shape;
    in.axes = e.axes;
    in.op = *it.op;
    in.tensor = it.tensor;
    in.role = e.role;
    in.logical = it.ref->c.dtype;
    in.atol = gt.atol;
    in.rtol = gt.rtol;
    if (gt.max_ulp) in.max_ulp = static_cast<std::uint64_t>(*gt.max_ulp);
    if (floor <= 0) {  // shape mismatch: no metric pass ran
      const RefScan sc = scan_reference(in.ref, in.logical, opt_.threads);
      floor = std::max(gt.near_zero * sc.max_abs, 1e-30);
    }
    in.floor = floor;
    declared_layouts(it, in);
    // Reference tensors of the op, for recomputing with an operand misread (issue 12).
    std::vector<Mapped> keep;
    add_reference_tensors(it, in, keep);
    return diagnose(in);
  }

  // The layouts the run declared for every tensor of the op (what the program was handed / wrote).
  static void declared_layouts(const PairItem& it, DiagnosisInput& in) {
    if (!it.run) return;
    const cases::OpRunRecord* o = it.run->op(*it.op);
    if (!o || !o->layouts) return;
    in.declared = *o->layouts;
    auto l = o->layouts->find(it.tensor);
    if (l != o->layouts->end()) in.declared_layout = l->second;
  }

  // The op's reference inputs (target included), its reference output and geometry.
  static void add_reference_tensors(const PairItem& it, DiagnosisInput& in,
                                    std::vector<Mapped>& keep) {
    keep.reserve(8);
    const cases::Op op = *it.op;
    for (const auto& t : it.ref->c.tensors(op)) {
      if (t.name != "output" && t.role != cases::Role::input) continue;
      auto m = open_npy((stdfs::path(it.ref->dtype_dir) / it.ref->c.file_name(op, t.name)).string());
      if (!m || m->header.shape != t.shape) continue;
      keep.push_back(std::move(*m));
      in.inputs[t.name] = keep.back().view();
      in.input_shapes[t.name] = t.shape;
    }
    // The convolution geometry of a conv-like op (the recompute families read it).
    const cases::OpInstance* inst = it.ref->c.find(op);
    if (!inst) return;
    in.params = inst->params;
    std::visit([&](const auto& p) {
      using P = std::decay_t<decltype(p)>;
      if constexpr (std::is_same_v<P, cases::ConvParams> || std::is_same_v<P, cases::ConvTransposeParams>) {
        in.conv.stride[0] = p.stride[0];
        in.conv.stride[1] = p.stride[1];
        in.conv.padding[0] = p.padding[0];
        in.conv.padding[1] = p.padding[1];
        in.conv.dilation[0] = p.dilation[0];
        in.conv.dilation[1] = p.dilation[1];
        in.conv.groups = p.groups;
        in.conv.bias = p.bias;
      }
    }, inst->params);
  }

  std::optional<LossRoundingCheck> loss_rounding_check(const PairItem& it, const LossStats& l) {
    if (it.ref->c.dtype == DType::float32 || !it.run) return std::nullopt;
    const cases::OpRunRecord* o = it.run->op(*it.op);
    if (!o || std::find(o->produced.begin(), o->produced.end(), "output") == o->produced.end())
      return std::nullopt;
    auto out = open_npy(
        (stdfs::path(it.run_file).parent_path() / it.ref->c.file_name(*it.op, "output")).string());
    if (!out) return std::nullopt;
    DiagnosisInput in;
    in.op = *it.op;
    in.role = ops::Role::loss;
    in.logical = it.ref->c.dtype;
    in.ref_loss = l.ref;
    in.run_loss = l.run;
    std::vector<Mapped> keep;
    add_reference_tensors(it, in, keep);
    return check_loss_rounding(in, out->view());
  }

  Diagnosis loss_diagnosis(const PairItem& it, const Entry& e, const Mapped& ref, const Mapped& run,
                           const Gates& gt, const LossStats& l) {
    DiagnosisInput in;
    in.ref = ref.view();
    in.run = run.view();
    in.op = *it.op;
    in.tensor = it.tensor;
    in.role = e.role;
    in.logical = it.ref->c.dtype;
    in.ref_loss = l.ref;
    in.run_loss = l.run;
    in.loss_abs = gt.loss_abs;
    in.loss_rel = gt.loss_rel;
    declared_layouts(it, in);
    std::vector<Mapped> keep;
    add_reference_tensors(it, in, keep);
    return diagnose(in);
  }

  const CompareOptions& opt_;
  Report& report_;
  std::vector<cases::RefCase> ref_;
  std::optional<RunDirectory> oracle_;
};

}  // namespace

bool GateResult::passed() const {
  return std::all_of(checks.begin(), checks.end(), [](const Check& c) { return c.passed; });
}

namespace {

// Two values with just enough significant digits (3 to 9) to tell them apart: a failure of a few
// float32 ULPs must not read "ref 1.12, run 1.12".
std::pair<std::string, std::string> distinct(double a, double b) {
  for (int digits = 3;; ++digits) {
    std::string x = fmt::format("{:.{}g}", a, digits), y = fmt::format("{:.{}g}", b, digits);
    if (x != y || digits == 9 || !(a != b)) return {x, y};
  }
}

}  // namespace

GateResult check_tensor_gates(const TensorStats& s, const Gates& gates, const Shape& shape,
                              const std::string& axes, const ArrayView& ref, const ArrayView& run) {
  GateResult out;
  auto check = [&](const std::string& name, double value, double limit, bool upper) {
    const bool ok = upper ? value <= limit : value >= limit;
    out.checks.push_back(Check{name, value, limit, upper, ok});
    return ok;
  };
  if (!check("nonfinite_mismatch", static_cast<double>(s.nonfinite.mismatches()), 0, true)) {
    const std::int64_t i = s.nonfinite.first_mismatch;
    const auto [r, u] = distinct(value_at(ref, i), value_at(run, i));
    out.reasons.push_back(fmt::format("{} NaN/Inf position mismatch{} (first at {}: ref {}, run {})",
                                      s.nonfinite.mismatches(), s.nonfinite.mismatches() == 1 ? "" : "es",
                                      format_coords(i, shape, axes), r, u));
  }
  if (gates.atol || gates.rtol || gates.max_ulp) {
    const std::int64_t finite_beyond = s.beyond_tolerance - s.nonfinite.mismatches();
    if (!check("beyond_tolerance", static_cast<double>(s.beyond_tolerance), 0, true) &&
        finite_beyond > 0) {
      std::string tol;
      if (gates.atol) tol += "atol " + g(*gates.atol);
      if (gates.rtol) tol += std::string(tol.empty() ? "" : " or ") + "rtol " + g(*gates.rtol);
      if (gates.max_ulp)
        tol += std::string(tol.empty() ? "" : ", ") + "max_ulp " + g(*gates.max_ulp);
      const auto [r, u] = distinct(s.worst_abs.ref, s.worst_abs.run);
      out.reasons.push_back(fmt::format(
          "{} of {} elements beyond tolerance ({}); worst at {}: ref {}, run {} (abs err {}, {} "
          "ULP); "
          "would pass with atol >= {} or rtol >= {}",
          finite_beyond, s.numel, tol, format_coords(s.worst_abs.index, shape, axes), r, u,
          g(s.worst_abs.abs_error), s.worst_abs.ulp, g(s.min_atol), g(s.min_rtol)));
    }
  }
  if (gates.max_ulp && !check("max_ulp", static_cast<double>(s.ulp.max), *gates.max_ulp, true))
    out.reasons.push_back(fmt::format("max ULP {} > {} at {}", s.ulp.max, g(*gates.max_ulp),
                                      format_coords(s.worst_ulp.index, shape, axes)));
  if (gates.min_pcc && s.numel > 1 && !check("min_pcc", s.pcc, *gates.min_pcc, false))
    out.reasons.push_back(fmt::format("pcc {:.6g} < {}", s.pcc, *gates.min_pcc));
  return out;
}

Result<Report> compare_sets(const CompareOptions& opt) {
  Report report;
  Comparer c(opt, report);
  Status st = c.run();
  if (!st) return st;
  return report;
}

}  // namespace validate::compare
