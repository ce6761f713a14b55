#include "validate/compare/compare.hpp"
#include "validate/compare/self_check.hpp"

#include "comparer.hpp"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "validate/cases/scale_check.hpp"
#include "validate/diagnosis/diagnosis_loss_check.hpp"
#include "validate/compare/diagnosis_op.hpp"
#include "validate/compare/pairing.hpp"
#include "validate/compare/trajectory_check.hpp"
#include "validate/metrics/ulp.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/mapped_file.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/sha256.hpp"
#include "validate/core/shell_quote.hpp"
#include "validate/core/version.hpp"
#include "validate/ops/registry.hpp"

namespace validate::compare {

namespace detail {

namespace stdfs = std::filesystem;

Status Comparer::run() {
  auto t0 = std::chrono::steady_clock::now();
  std::optional<Pattern> only, variant;
  if (!opt_.only.empty()) {
    auto p = Pattern::compile(opt_.only, "--only");
    if (!p) return p.status();
    only = std::move(*p);
  }
  if (!opt_.variant.empty()) {
    auto p = Pattern::compile(opt_.variant, "--variant");
    if (!p) return p.status();
    variant = std::move(*p);
  }
  auto ref_manifest = cases::read_manifest(opt_.ref_dir);
  if (!ref_manifest) return Error{"reference set " + ref_manifest.message()};
  auto ref = cases::load_cases(opt_.ref_dir);
  if (!ref) return ref.status();
  ref_ = std::move(*ref);
  // A set of one scale format as a whole (cases/scale_check.hpp): a scale removed from one tensor
  // would gate it by the looser fixed tolerance of sets made before scales.
  if (auto bad = cases::check_scale_format(ref_); !bad.empty())
    return Error{fmt::format("reference set {} is invalid: {}", opt_.ref_dir, bad.front())};
  auto runs = load_run(opt_.run_dir);
  if (!runs) return runs.status();
  if (!opt_.oracle_dir.empty()) {
    auto o = load_run_directory(opt_.oracle_dir, "oracle");
    if (!o) return Error{"oracle: " + o.message()};
    oracle_ = std::move(*o);
  }
  report_.require_all = opt_.require_all;
  // A set merged with --allow-partial lacks whole shards: its missing cases are not even "not run"
  // (the reference does not list them), so only the manifest's "partial" mark can say so.
  auto note_partial = [&](const Json& m, const std::string& dir, const char* what) {
    if (!m.is_object() || m.value("partial", false) != true) return;
    const std::string line = fmt::format(
        "{} {} is partial (merged with --allow-partial: shards are missing)", what, dir);
    report_.partial.push_back(line);
    report_.warnings.push_back(line);
  };
  note_partial(*ref_manifest, opt_.ref_dir, "reference set");
  if (auto run_manifest = cases::read_manifest(opt_.run_dir))
    note_partial(*run_manifest, opt_.run_dir, "run");
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
    if (variant && !variant->search(r.label)) continue;
    VALIDATE_TRY(check_belongs(r));
  }
  if (oracle_) VALIDATE_TRY(check_oracle(*runs));
  for (const auto& r : *runs) {
    if (variant && !variant->search(r.label)) continue;
    report_.variants.push_back(r.label);
    for (auto& w : unnamed_result_warnings(r, r.label.empty() ? opt_.run_dir : "variant " + r.label))
      report_.warnings.push_back(std::move(w));
    for (const auto& item : pair_run(ref_, r)) {
      if (only && !matches(*only, item)) continue;
      Entry e = evaluate(r, item);
      if (opt_.on_entry) opt_.on_entry(e);
      report_.entries.push_back(std::move(e));
    }
  }
  if (auto w = oracle_uncovered_warning(); !w.empty()) report_.warnings.push_back(std::move(w));
  for (const auto& r : opt_.policy.unmatched_rules())
    report_.warnings.push_back("policy rule " + r + " matched no tensor of the compared sets: it gates nothing");
  if (opt_.diagnose) refine_op_diagnoses(report_.entries);  // issue 12: the op's entries together
  refine_trajectories(report_.entries, report_.warnings);   // issue 15: the trajectory verdicts
  report_.elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return Status::ok();
}

// A run of another reference set (another case file, another sweep) shares no case with it:
// pairing would list every reference tensor as "not run" and every run case as unknown, hundreds
// of lines around the one fact that matters. One error names both sides instead (exit 2). A run of
// part of the set (--only, --shard) shares its cases and is compared as usual.
Status Comparer::check_belongs(const RunDirectory& run) const {
  if (run.cases.empty()) return Status::ok();  // nothing to pair: reported as "nothing compared"
  std::vector<std::string> ref_keys;
  for (const auto& rc : ref_) ref_keys.push_back(std::string(dtype_name(rc.c.dtype)) + "/" + rc.c.name);
  for (const auto& [key, rec] : run.cases)
    if (std::find(ref_keys.begin(), ref_keys.end(), key) != ref_keys.end()) return Status::ok();
  auto some = [](const std::vector<std::string>& keys) {
    std::string s;
    for (std::size_t i = 0; i < keys.size() && i < 3; ++i) s += (i ? ", " : "") + keys[i];
    return keys.size() > 3 ? s + ", ..." : s;
  };
  std::vector<std::string> run_keys;
  for (const auto& [key, rec] : run.cases) run_keys.push_back(key);
  const std::string run_dir = run.label.empty() ? opt_.run_dir : run.root;
  std::string made_from;
  if (const Json* p = find_path(run.run_info, {"reference", "path"}); p && p->is_string() && !p->get<std::string>().empty())
    made_from = "; the run was made from " + p->get<std::string>();
  return Error{fmt::format(
      "{} and {} do not belong together: none of the run's {} case(s) ({}) is in the reference set, whose {} "
      "case(s) are {}{}",
      opt_.ref_dir, run_dir, run_keys.size(), some(run_keys), ref_keys.size(),
      ref_keys.empty() ? std::string("none") : some(ref_keys), made_from)};
}

// Gradients an exec program wrote although its layout file does not name them were read in the
// spec the file's base preset gives (runners.md, step 8) and are checked. The report says so once
// per op, naming the specs: a failure of such a gradient may be nothing but an undeclared layout.
std::vector<std::string> Comparer::unnamed_result_warnings(const RunDirectory& run, const std::string& who) {
  // op -> tensor -> (spec, cases)
  std::map<std::string, std::map<std::string, std::pair<std::string, int>>> seen;
  for (const auto& [key, rec] : run.cases)
    for (const auto& [op, o] : rec.ops)
      for (const auto& [tensor, spec] : o.notes.unnamed_results) {
        auto& e = seen[cases::op_name(op)][tensor];
        if (e.first.empty()) e.first = spec;
        ++e.second;
      }
  std::string file;
  if (const Json* n = find_path(run.run_info, {"layout", "name"}); n && n->is_string()) file = " " + n->get<std::string>();
  std::vector<std::string> out;
  for (const auto& [op, tensors] : seen) {
    std::string names, specs;
    int cases_n = 0;
    for (const auto& [tensor, e] : tensors) {
      names += (names.empty() ? "" : ", ") + tensor;
      specs += (specs.empty() ? "" : ", ") + tensor + " " + e.first;
      cases_n = std::max(cases_n, e.second);
    }
    out.push_back(fmt::format(
        "{}: the layout file{} names no {} for {}, but the program wrote {}: read in the layout{} of its base "
        "preset ({}) and checked, in {} case(s); name {} in the layout file if the program writes another layout",
        who, file, names, op, tensors.size() == 1 ? "it" : "them", tensors.size() == 1 ? "" : "s", specs, cases_n,
        tensors.size() == 1 ? "it" : "them"));
  }
  return out;
}

bool Comparer::matches(const Pattern& re, const PairItem& it) {
  const std::string base = it.dtype + "/" + it.case_name + (it.op ? "/" + std::string(cases::op_name(*it.op)) : "");
  if (re.search(it.tensor.empty() ? base : base + "/" + it.tensor)) return true;
  if (it.kind == PairItem::Kind::op_outcome &&
      it.ref) {  // an op-level entry stands for all its tensors
    for (const auto& t : it.ref->c.tensors(*it.op))
      if (re.search(base + "/" + t.name)) return true;
  }
  return false;
}

std::string Comparer::repro(const Entry& e, const std::string& label) const {
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

Entry Comparer::evaluate(const RunDirectory& run, const PairItem& it) {
  current_run_ = &run;
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

void Comparer::invalid(Entry& e, const std::string& msg) {
  e.verdict = Verdict::invalid;
  e.message = msg;
  report_.input_errors.push_back(msg);
}

}  // namespace detail

Result<Report> compare_sets(const CompareOptions& opt) {
  Report report;
  detail::Comparer c(opt, report);
  Status st = c.run();
  if (!st) return st;
  return report;
}

}  // namespace validate::compare
