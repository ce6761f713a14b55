// The rounding-bias check of a tensor held to the error bound (rounding_bias.hpp; docs/compare.md,
// "Rounding bias"): the per-element bound sees each element alone, so a tensor stored by truncation,
// or off by a uniform 0.3% in bfloat16, passes it element by element. Over the tensor the bias
// stands out of the rounding noise.
#include <future>
#include <type_traits>
#include <variant>

#include <fmt/format.h>

#include "comparer.hpp"
#include "validate/metrics/rounding_bias.hpp"

namespace validate::compare::detail {

namespace {

// The kernel height and row dilation of a conv-like op (0, 1 for any other): how many grad_input
// rows read one dL/dy row.
std::pair<std::int64_t, std::int64_t> kernel_rows(const PairItem& it) {
  std::pair<std::int64_t, std::int64_t> kd{0, 1};
  if (!it.ref || !it.op) return kd;
  for (const auto& t : it.ref->c.tensors(*it.op))
    if (t.name == "weight" && t.shape.size() == 4) kd.first = t.shape[2];
  if (const cases::OpInstance* inst = it.ref->c.find(*it.op))
    std::visit(
        [&](const auto& p) {
          using P = std::decay_t<decltype(p)>;
          if constexpr (std::is_same_v<P, cases::ConvParams> || std::is_same_v<P, cases::ConvTransposeParams>)
            kd.second = p.dilation[0];
        },
        inst->params);
  return kd;
}

// The grouping of `e`'s errors: none for an output (independent elements); for a gradient the blocks
// of elements that share dL/dy elements (its errors are correlated through dL/dy: one rounded dL/dy
// element moves a whole row of grad_A, every channel of grad_input at its positions, so the standard
// error of independent elements understates its noise: the float64 oracle's bfloat16 grad_A of the
// smoke set leans 4.3 such standard errors). nullopt for a tensor with no known grouping.
std::optional<std::optional<BiasBlocks>> grouping(const PairItem& it, const Entry& e) {
  if (e.role == ops::Role::output) return std::optional<BiasBlocks>();
  if (e.role != ops::Role::grad) return std::nullopt;
  const auto [kh, dil] = kernel_rows(it);
  auto blocks = gradient_blocks(it.tensor, e.axes, kh, dil);
  if (!blocks) return std::nullopt;
  return std::optional<BiasBlocks>(std::move(*blocks));
}

}  // namespace

std::future<RoundingBiasCheck> start_rounding_bias_check(const PairItem& it, const Entry& e, const ArrayView& ref,
                                                         const ArrayView& run, const ArrayView& scale,
                                                         const BoundOptions& o) {
  // What correct stacks may share, and what a correct in-order sum of same-sign terms may lean on
  // its own (accumulation_bias: positive operands spanning 8 decades lean 3e-6 toward zero at n = 4608).
  // The estimate's sums and the accumulation's run over the same elements: one pass takes them
  // side by side.
  return std::async(std::launch::async, [group = grouping(it, e), shape = e.shape, ref, run, scale, o] {
    if (!group) return RoundingBiasCheck{std::nullopt, allowed_bias(o) + accumulation_bias(ref, scale, o)};
    const auto both = rounding_bias_and_accumulation(ref, run, scale, o, shape, *group ? &**group : nullptr, INFINITY);
    const double allowed = allowed_bias(o) + both.accumulated;
    return RoundingBiasCheck{with_allowance(both.bias, allowed), allowed};
  });
}

void add_rounding_bias(const RoundingBiasCheck& check, GateResult& gr) {
  const auto& est = check.estimate;
  const double allowed = check.allowed;
  // Fewer than 3 independent groups of blocks: no estimate of the noise to hold the bias against.
  if (!est || est->elements < 2 || (est->blocks && est->dof < 2)) return;
  const RoundingBias& b = *est;
  gr.checks.push_back(Check{"rounding_bias", b.z, b.threshold, true, !b.biased()});
  if (!b.biased()) return;
  const std::string noise =
      b.blocks ? fmt::format("{:.0f} standard errors of {} blocks of elements that share dL/dy elements (named from "
                             "{:.3g}, a Student t of {:.0f} degrees of freedom)",
                             b.z, b.blocks, b.threshold, b.dof)
               : fmt::format("{:.0f} standard errors", b.z);
  gr.reasons.push_back(fmt::format(
      "the errors lean {} zero over the tensor: a relative bias of {:.3g} (+- {:.2g}; {} of {} elements toward zero, "
      "{} away), {} beyond the {:.2g} correct stacks may share; each element may be within its own bound — a "
      "biased rounding (truncation) or a scale factor rounded in a narrow type",
      b.relative < 0 ? "toward" : "away from", b.relative, b.se, b.toward_zero, b.elements, b.away_from_zero, noise,
      allowed));
}

}  // namespace validate::compare::detail
