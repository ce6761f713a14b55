// The loss held against the program's own stored output (diagnosis_loss_check.hpp).
#include "validate/diagnosis/diagnosis_loss_check.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "diagnosis_internal.hpp"

namespace validate::compare {

using namespace detail;

std::optional<LossRoundingCheck> check_loss_rounding(const DiagnosisInput& in,
                                                     const ArrayView& run_output) {
  if (in.logical == DType::float32 || !in.inputs.count("target") ||
      !in.input_shapes.count("output"))
    return std::nullopt;
  const ArrayView T = in.inputs.at("target");
  const std::int64_t n = T.numel;
  if (n <= 0 || run_output.numel != n || !std::isfinite(in.run_loss)) return std::nullopt;
  LossRoundingCheck c;
  c.run = in.run_loss;
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(read_value(run_output, i)) - read_value(T, i);
    sum += d * d;
  }
  c.stored = sum / static_cast<double>(n);
  // Within 8 float32 units of the stored output's loss: the loss is the stored output's (what an
  // honest stack's float32 reduction gives), and nothing more is computed. Beyond it (a naive
  // float32 sum may be), the float64 forward pass decides.
  const double ulps8 = std::ldexp(std::max(std::fabs(c.run), std::fabs(c.stored)), -21);
  if (std::fabs(c.run - c.stored) <= ulps8) return std::nullopt;
  // Within 8 units of the reference's loss (the reference's own float32 reduction sits further
  // than that from the float64 MSE of its output): no loss within 8 units of the reference can be
  // told from it either, and a passing set pays no forward pass.
  if (std::fabs(c.run - in.ref_loss) <= ulps8) return std::nullopt;
  std::vector<double> y;
  const Shape out = in.input_shapes.at("output");
  const bool ok = forward_all(in, out, y);  // the op's own float64 reference
  if (!ok || static_cast<std::int64_t>(y.size()) != n) return std::nullopt;
  double su = 0, sr = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double t = read_value(T, i), u = y[static_cast<std::size_t>(i)] - t,
                 r = round_to_logical(y[static_cast<std::size_t>(i)], in.logical) - t;
    su += u * u;
    sr += r * r;
  }
  c.unrounded = su / static_cast<double>(n);
  c.rounded = sr / static_cast<double>(n);
  const double du = std::fabs(c.run - c.unrounded),
               ds = std::min(std::fabs(c.run - c.stored), std::fabs(c.run - c.rounded));
  c.ratio = ds > 0 ? du / ds : INFINITY;
  // Decidable only when rounding the output moves the loss by more than 8 float32 units: below
  // that, summation order alone could put an honest loss nearer the unrounded one.
  if (std::fabs(c.unrounded - c.rounded) <= ulps8) return std::nullopt;
  c.failed = c.ratio < LossRoundingCheck::kLimit;
  if (c.failed)
    c.message = fmt::format(
        "loss taken on the unrounded output: the run's loss {:.9g} is the MSE of the output before "
        "rounding to {} ({:.9g}), not of the output as stored ({:.9g}); round the output to {} "
        "first, then take the loss and dL/dy on it",
        c.run, dtype_name(in.logical), c.unrounded, c.stored, dtype_name(in.logical));
  return c;
}

}  // namespace validate::compare
