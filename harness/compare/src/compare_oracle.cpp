// Three-way mode: each side against a float64 oracle run, rounded to the logical dtype.
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

std::string Comparer::closer(const OracleComparison& oc) {
  const double a = oc.ref_max_abs, b = oc.run_max_abs;
  if (std::fabs(a - b) <= 0.05 * std::max(a, b)) return "tie";
  return b < a ? "run" : "reference";
}

std::string Comparer::oracle_file(const PairItem& it) const {
  auto c = oracle_->cases.find(it.dtype + "/" + it.case_name);
  if (c == oracle_->cases.end()) return "";
  const cases::OpRunRecord* o = c->second.op(*it.op);
  if (!o || o->outcome != cases::Outcome::ok) return "";
  if (std::find(o->produced.begin(), o->produced.end(), it.tensor) == o->produced.end()) return "";
  const std::string f =
      (stdfs::path(oracle_->root) / it.dtype / it.ref->c.file_name(*it.op, it.tensor)).string();
  return fs::exists(f) ? f : "";
}

void Comparer::compare_oracle(const PairItem& it, Entry& e, const Mapped& ref, const Mapped& run,
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

}  // namespace validate::compare::detail
