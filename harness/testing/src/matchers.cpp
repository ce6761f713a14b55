#include "validate/testing/matchers.hpp"

#include <sstream>

#include <fmt/format.h>

#include "validate/compare/comparison.hpp"
#include "validate/compare/diagnosis.hpp"
#include "validate/compare/metrics.hpp"

namespace validate::testing {

namespace {

std::string coords(std::int64_t index, const Shape& shape, const std::string& axes) {
  if (axes.size() == shape.size()) return compare::format_coords(index, shape, axes);
  std::string s = "[";
  std::int64_t rest = index;
  std::vector<std::int64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? rest % shape[d] : 0;
    rest = shape[d] ? rest / shape[d] : 0;
  }
  for (std::size_t d = 0; d < idx.size(); ++d) s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

}  // namespace

TensorMatcher TensorMatcher::ulp(const Tensor& reference, std::uint64_t max_ulp) {
  TensorMatcher m;
  m.ref_ = std::make_shared<const Tensor>(reference.clone());
  m.max_ulp_ = max_ulp;
  return m;
}

TensorMatcher TensorMatcher::close(const Tensor& reference, double atol, double rtol) {
  TensorMatcher m;
  m.ref_ = std::make_shared<const Tensor>(reference.clone());
  m.atol_ = atol;
  m.rtol_ = rtol;
  return m;
}

TensorMatcher& TensorMatcher::WithAxes(std::string axes) {
  axes_ = std::move(axes);
  return *this;
}

TensorMatcher& TensorMatcher::InDtype(DType logical) {
  logical_ = logical;
  return *this;
}

bool TensorMatcher::MatchAndExplain(const Tensor& run, std::ostream* os) const {
  const Tensor& ref = *ref_;
  if (run.numel() != ref.numel()) {
    if (os) *os << "has shape " << shape_to_string(run.shape()) << " but the reference is " << shape_to_string(ref.shape());
    return false;
  }
  compare::MetricOptions opt;
  opt.logical = logical_.value_or(ref.dtype() == DType::float64 ? DType::float32 : ref.dtype());
  opt.atol = atol_;
  opt.rtol = rtol_;
  opt.max_ulp = max_ulp_;
  auto stats = compare::compute_metrics(compare::view_of(ref), compare::view_of(run), opt);
  if (!stats) {
    if (os) *os << stats.message();
    return false;
  }
  const auto& s = *stats;
  const bool ok = s.beyond_tolerance == 0 && s.nonfinite.mismatches() == 0;
  if (!os) return ok;
  const auto& w = max_ulp_ ? s.worst_ulp : s.worst_abs;
  if (ok) {
    *os << fmt::format("max ULP {}, max abs error {:.3g}", s.max_ulp_any(), s.max_abs);
    return true;
  }
  *os << fmt::format("{} of {} elements beyond tolerance", s.beyond_tolerance, s.numel);
  if (s.nonfinite.mismatches())
    *os << fmt::format(" ({} NaN/Inf mismatches, first at {})", s.nonfinite.mismatches(),
                       coords(s.nonfinite.first_mismatch, ref.shape(), axes_));
  if (w.index >= 0)
    *os << fmt::format("; worst at {}: reference {:.9g}, got {:.9g} (abs error {:.3g}, {} ULP)",
                       coords(w.index, ref.shape(), axes_), w.ref, w.run, w.abs_error, w.ulp);
  *os << fmt::format("; max ULP {}, would pass with atol >= {:.3g} or rtol >= {:.3g}", s.max_ulp_any(), s.min_atol,
                     s.min_rtol);
  compare::DiagnosisInput in;
  in.ref = compare::view_of(ref);
  in.run = compare::view_of(run);
  in.shape = ref.shape();
  in.run_shape = run.shape();
  in.axes = axes_.size() == ref.shape().size() ? axes_ : std::string();
  in.logical = opt.logical;
  in.floor = s.near_zero_floor;
  in.atol = atol_;
  in.rtol = rtol_;
  in.max_ulp = max_ulp_;
  if (!in.axes.empty()) {
    auto d = compare::diagnose(in);
    if (!d.summary.empty()) *os << "; diagnosis: " << d.summary;
  }
  return false;
}

void TensorMatcher::DescribeTo(std::ostream* os) const {
  if (max_ulp_) *os << "is within " << *max_ulp_ << " ULP of the reference " << shape_to_string(ref_->shape());
  else *os << fmt::format("is close to the reference {} (atol {:.3g} or rtol {:.3g})", shape_to_string(ref_->shape()), *atol_, *rtol_);
}

void TensorMatcher::DescribeNegationTo(std::ostream* os) const {
  *os << "is not ";
  DescribeTo(os);
}

}  // namespace validate::testing
