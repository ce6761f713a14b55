#include "validate/testing/matchers.hpp"

#include <ostream>

#include <fmt/format.h>

#include "validate/compare/comparison.hpp"
#include "validate/diagnosis/diagnosis.hpp"
#include "validate/metrics/metrics.hpp"
#include "validate/compare/policy.hpp"

namespace validate {

void PrintTo(const Tensor& t, std::ostream* os) {
  *os << dtype_name(t.dtype()) << ' ' << shape_to_string(t.shape());
}

}  // namespace validate

namespace validate::testing {

namespace {

// Axes the diagnosis can assume when none were given: a 4-d tensor has its spatial axes last
// (NCHW and OIHW alike, so the H<->W swap of a square tensor is still found), a 2-d one is a
// matrix whose only usual mistake is a transpose. Other ranks: nothing sensible to assume.
std::string assumed_axes(std::size_t rank) {
  if (rank == 4) return "NCHW";
  if (rank == 2) return "MK";
  return "";
}

// compare's diagnosis line (harness/report/src/terminal.cpp prints the same words).
void explain_diagnosis(const compare::Diagnosis& d, const std::string& assumed, std::ostream& os) {
  const std::string note =
      assumed.empty() ? "" : " (axes assumed " + assumed + "; name them with .WithAxes())";
  if (!d.summary.empty())
    os << "\ndiagnosis: " << d.summary << note;
  else if (d.tried > 0)
    os << fmt::format("\ndiagnosis: none of {} usual layout mistakes explains it", d.tried) << note;
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

TensorMatcher& TensorMatcher::Named(std::string name) {
  name_ = std::move(name);
  return *this;
}

bool TensorMatcher::MatchAndExplain(const Tensor& run, std::ostream* os) const {
  const Tensor& ref = *ref_;
  const std::size_t rank = ref.shape().size();
  if (!axes_.empty() && axes_.size() != rank) {
    if (os)
      *os << fmt::format("WithAxes(\"{}\") names {} axes but the reference {} has {}", axes_,
                         axes_.size(), shape_to_string(ref.shape()), rank);
    return false;
  }
  const std::string diag_axes = axes_.empty() ? assumed_axes(rank) : axes_;
  const std::string assumed = axes_.empty() ? diag_axes : std::string();

  compare::Gates gates;
  if (max_ulp_) gates.max_ulp = static_cast<double>(*max_ulp_);
  gates.atol = atol_;
  gates.rtol = rtol_;
  compare::DiagnosisInput in;
  in.ref = compare::view_of(ref);
  in.run = compare::view_of(run);
  in.shape = ref.shape();
  in.run_shape = run.shape();
  in.axes = diag_axes;
  // A value in the user's test, not a program's file: the advice names the tensor, never "<x>.bin".
  in.in_memory = true;
  in.tensor = name_;
  in.logical = logical_.value_or(ref.dtype() == DType::float64 ? DType::float32 : ref.dtype());
  in.atol = atol_;
  in.rtol = rtol_;
  in.max_ulp = max_ulp_;

  // Same element count is not enough: a [3,2] result is not a [2,3] reference. As in compare, a
  // permuted shape still gets a diagnosis (it names the permutation).
  if (run.shape() != ref.shape()) {
    if (!os) return false;
    *os << fmt::format("shape mismatch: run is {}, reference {}", shape_to_string(run.shape()),
                       shape_to_string(ref.shape()));
    if (run.numel() == ref.numel() && !diag_axes.empty()) {
      const compare::RefScan sc = compare::scan_reference(in.ref, in.logical);
      in.floor = std::max(gates.near_zero * sc.max_abs, 1e-30);
      explain_diagnosis(compare::diagnose(in), assumed, *os);
    }
    return false;
  }

  compare::MetricOptions opt;
  opt.logical = in.logical;
  opt.near_zero_fraction = gates.near_zero;
  opt.atol = atol_;
  opt.rtol = rtol_;
  opt.max_ulp = max_ulp_;
  auto stats = compare::compute_metrics(in.ref, in.run, opt);
  if (!stats) {
    if (os) *os << stats.message();
    return false;
  }
  const compare::TensorStats& s = *stats;
  const compare::GateResult gr =
      compare::check_tensor_gates(s, gates, ref.shape(), axes_, in.ref, in.run);
  if (!os) return gr.passed();
  if (gr.passed()) {
    *os << fmt::format("max ULP {}, max abs error {:.3g}", s.max_ulp_any(), s.max_abs);
    return true;
  }
  std::string msg;
  for (const auto& r : gr.reasons) msg += (msg.empty() ? "" : "; ") + r;
  *os << msg;
  if (!diag_axes.empty()) {
    in.floor = s.near_zero_floor;
    explain_diagnosis(compare::diagnose(in), assumed, *os);
  }
  return false;
}

void TensorMatcher::DescribeTo(std::ostream* os) const {
  if (max_ulp_)
    *os << fmt::format("is within {} ULP of the reference {}", *max_ulp_,
                       shape_to_string(ref_->shape()));
  else
    *os << fmt::format("is close to the reference {} (atol {:.3g} or rtol {:.3g})",
                       shape_to_string(ref_->shape()), *atol_, *rtol_);
}

void TensorMatcher::DescribeNegationTo(std::ostream* os) const {
  *os << "is not ";
  DescribeTo(os);
}

}  // namespace validate::testing
