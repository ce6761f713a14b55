// Three-way mode: each side against a float64 oracle run, rounded to the logical dtype. The oracle
// decides verdicts (its values are "exact"), so it is checked as hard as the run: it must be the
// oracle backend's run of the same reference inputs, not the run being judged, and every file it
// supplies must be the one its manifest lists, with no NaN.
#include "comparer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <type_traits>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "validate/metrics/ulp.hpp"
#include "validate/core/fs.hpp"
#include "validate/ops/registry.hpp"

namespace validate::compare::detail {

namespace stdfs = std::filesystem;

namespace {

bool same_directory(const std::string& a, const std::string& b) {
  std::error_code ec;
  return stdfs::equivalent(a, b, ec) && !ec;
}

std::int64_t count_nan(const ArrayView& v) {
  std::int64_t n = 0;
  if (v.storage == DType::float64) {
    for (std::int64_t i = 0; i < v.numel; ++i) {
      double d;
      std::memcpy(&d, v.data + 8 * i, 8);
      n += std::isnan(d);
    }
  } else {
    for (std::int64_t i = 0; i < v.numel; ++i) n += std::isnan(value_at(v, i));
  }
  return n;
}

std::string sha_of(const Json& files, const std::string& rel) {
  auto it = files.find(rel);
  if (it == files.end() || !it->is_object()) return "";
  const Json* s = find_path(*it, {"sha256"});
  return s && s->is_string() ? s->get<std::string>() : "";
}

}  // namespace

Status Comparer::check_oracle(const std::vector<RunDirectory>& runs) const {
  const RunDirectory& o = *oracle_;
  const std::string who = "--oracle " + opt_.oracle_dir;
  // Made by the float64 oracle: another backend's run (LibTorch's float32) is a second opinion,
  // not the exact values the three-way verdict holds both sides to.
  const std::string info = (stdfs::path(o.root) / "run_info.json").string();
  if (!o.files.contains("run_info.json"))
    return Error{fmt::format("{}: the run lists no run_info.json, so nothing says it was made by the float64 "
                             "oracle (validate run --backend oracle)",
                             who)};
  const Json* backend = find_path(o.run_info, {"backend"});
  const std::string b = backend && backend->is_string() ? backend->get<std::string>() : "";
  if (b != "oracle")
    return Error{fmt::format("{}: {} says backend \"{}\": the exact values must be the float64 oracle's run "
                             "(validate run --backend oracle)",
                             who, info, b)};
  // Not the run being judged: judged against itself every tensor is exact and passes.
  for (const auto& r : runs) {
    const std::string run_dir = r.label.empty() ? opt_.run_dir : r.root;
    if (same_directory(o.root, r.root))
      return Error{fmt::format("{} is the run being judged ({}): a run cannot be its own exact values", who,
                               run_dir)};
    std::int64_t shared = 0, same = 0;
    for (const auto& [rel, entry] : o.files.items()) {
      if (rel.size() < 4 || rel.compare(rel.size() - 4, 4, ".npy") != 0) continue;
      const std::string theirs = sha_of(r.files, rel);
      if (theirs.empty()) continue;
      ++shared;
      same += sha_of(o.files, rel) == theirs;
    }
    if (shared > 0 && same == shared)
      return Error{fmt::format("{} holds byte-identical copies of all {} tensor files of the run being judged "
                               "({}; sha256 from both manifests): a copy of the run cannot be its exact values",
                               who, shared, run_dir)};
  }
  // Made from the same reference inputs, proven as the run's are (pair_run): every input hash the
  // oracle recorded for a case the reference has must be the reference's. An oracle of another
  // set (another seed) would hold the correct run to the exact values of other inputs.
  std::int64_t common = 0;
  for (const auto& rc : ref_) {
    const std::string key = std::string(dtype_name(rc.c.dtype)) + "/" + rc.c.name;
    auto oc = o.cases.find(key);
    if (oc == o.cases.end()) continue;
    ++common;
    const std::string file = (stdfs::path(o.root) / oc->second.path).string();
    for (const cases::OpInstance& inst : rc.c.ops) {
      const cases::Op op = inst.op();
      const cases::OpRunRecord* opr = oc->second.op(op);
      if (!opr || opr->outcome != cases::Outcome::ok) continue;
      const std::string opn = cases::op_name(op);
      for (const auto& t : rc.c.tensors(op)) {
        if (t.role != cases::Role::input) continue;
        const std::string expected = reference_input_hash(rc.metadata, op, t.name);
        if (expected.empty()) continue;  // the reference cannot prove it; verify reports that
        const std::string* got = recorded_input_hash(*opr, t.name);
        if (!got)
          return Error{fmt::format("{}: {} records no hash for {} input '{}', so the oracle cannot show it "
                                   "consumed the reference's data",
                                   who, file, opn, t.name)};
        if (*got != expected)
          return Error{fmt::format("{}: {}: the oracle consumed different {} input '{}' data than the reference "
                                   "{} (oracle sha256 {}…, reference {}…): an oracle of other inputs",
                                   who, file, opn, t.name, opt_.ref_dir, got->substr(0, 16),
                                   expected.substr(0, 16))};
      }
    }
  }
  if (common == 0)
    return Error{fmt::format("{}: none of the oracle's {} case(s) is in the reference set {}: an oracle of "
                             "another reference set",
                             who, o.cases.size(), opt_.ref_dir)};
  return Status::ok();
}

std::string Comparer::closer(const OracleComparison& oc) {
  const double a = oc.ref_max_abs, b = oc.run_max_abs;
  if (std::fabs(a - b) <= 0.05 * std::max(a, b)) return "tie";
  return b < a ? "run" : "reference";
}

Result<std::optional<Mapped>> Comparer::open_oracle(const PairItem& it, const Entry& e) {
  if (!oracle_) return std::optional<Mapped>();
  const std::string id = (e.variant.empty() ? "" : e.variant + ": ") + e.id();
  auto uncovered = [&](const char* why) {
    oracle_uncovered_.emplace(id, why);
    return std::optional<Mapped>();
  };
  auto c = oracle_->cases.find(it.dtype + "/" + it.case_name);
  if (c == oracle_->cases.end()) return uncovered("the oracle has no such case");
  const cases::OpRunRecord* o = c->second.op(*it.op);
  if (!o) return uncovered("the oracle has no such op");
  if (o->outcome != cases::Outcome::ok) return uncovered("the oracle's op did not succeed");
  if (std::find(o->produced.begin(), o->produced.end(), it.tensor) == o->produced.end())
    return uncovered("the oracle did not produce it");
  const std::string rel = it.dtype + "/" + it.ref->c.file_name(*it.op, it.tensor);
  // A file the run holds byte for byte is no exact value for it (a partial copy of the run).
  if (current_run_) {
    const std::string mine = sha_of(current_run_->files, it.run_rel);
    if (!mine.empty() && mine == sha_of(oracle_->files, rel))
      return uncovered("its oracle file is byte-identical to the run's");
  }
  const std::string f = (stdfs::path(oracle_->root) / rel).string();
  auto om = open_npy(f);
  if (!om) return Error{"oracle: " + om.message()};
  if (!oracle_verified_.count(rel)) {
    // Its manifest vouches for every file it supplies, as the run's does for the run.
    VALIDATE_TRY(check_listed_bytes(*oracle_, rel, om->file.data(), om->file.size()));
    if (shape_numel(om->header.shape) != shape_numel(e.shape))
      return Error{fmt::format("oracle: {} has shape {}, expected {}", f, shape_to_string(om->header.shape),
                               shape_to_string(e.shape))};
    if (const std::int64_t nan = count_nan(om->view()); nan > 0)
      return Error{fmt::format("oracle: {} holds {} NaN value(s): a NaN exact value is a broken oracle, and "
                               "nothing can be judged against it",
                               f, nan)};
    oracle_verified_.insert(rel);
  }
  return std::optional<Mapped>(std::move(*om));
}

std::string Comparer::oracle_uncovered_warning() const {
  if (oracle_uncovered_.empty()) return "";
  std::map<std::string, std::int64_t> why;
  std::string some;
  std::size_t shown = 0;
  for (const auto& [id, reason] : oracle_uncovered_) {
    ++why[reason];
    if (shown++ < 6) some += (some.empty() ? "" : ", ") + id;
  }
  if (oracle_uncovered_.size() > 6) some += fmt::format(", and {} more", oracle_uncovered_.size() - 6);
  std::string reasons;
  for (const auto& [reason, n] : why) reasons += fmt::format("{}{}: {}", reasons.empty() ? "" : "; ", reason, n);
  return fmt::format("{} compared tensor(s) are not covered by the oracle {} and were judged two-way, against the "
                     "reference alone ({}): {}",
                     oracle_uncovered_.size(), opt_.oracle_dir, reasons, some);
}

void Comparer::compare_oracle(const PairItem& it, Entry& e, const Mapped& ref, const Mapped& run,
                              DType logical) {
  if (!oracle_) return;
  auto om = open_oracle(it, e);
  if (!om) return invalid(e, om.message());
  if (!*om) return;
  MetricOptions mo;
  mo.logical = logical;
  mo.threads = opt_.threads;
  // The oracle rounded to the logical dtype: the best any stack of that dtype can return.
  auto a = compute_metrics((*om)->view(true), ref.view(), mo);
  auto b = compute_metrics((*om)->view(true), run.view(), mo);
  if (!a || !b) return;
  OracleComparison oc;
  oc.ref_max_abs = a->max_abs;
  oc.run_max_abs = b->max_abs;
  oc.ref_max_ulp = a->max_ulp_any();
  oc.run_max_ulp = b->max_ulp_any();
  oc.closer = closer(oc);
  e.oracle = oc;
}

}  // namespace validate::compare::detail
