// The loss and the scale of the gradients: MSE taken as a sum, or as a mean over the wrong count
// (the batch only, one sample only), which scales the loss and every gradient by the same factor;
// and the loss taken on the output before it was rounded to the case dtype (bfloat16, float16:
// the reference takes it on the output as stored, docs/runners.md).
#include <cmath>

#include <fmt/format.h>

#include "diagnosis_internal.hpp"
#include "validate/ops/registry.hpp"

namespace validate::compare::detail {

namespace {

struct Scale {
  const char* code;
  double factor;        // run / reference
  std::int64_t count;   // what the program divided by
  std::string words;
};

std::vector<Scale> scales(const Shape& out) {
  const std::int64_t numel = shape_numel(out), rows = out.empty() ? 1 : out[0];
  std::vector<Scale> v;
  v.push_back({"loss_sum", static_cast<double>(numel), 1, "a sum over the elements, not the mean"});
  if (rows > 1) {
    v.push_back({"loss_mean_count", static_cast<double>(numel) / static_cast<double>(rows), rows,
                 fmt::format("a mean over the {} of the first axis (batch) only, not over all {} "
                             "elements",
                             rows, numel)});
    v.push_back({"loss_mean_count", static_cast<double>(rows), numel / rows,
                 fmt::format("a mean over one sample's {} elements, not over all {}", numel / rows,
                             numel)});
  }
  return v;
}

}  // namespace

void search_loss(const DiagnosisInput& in, Search& s) {
  if (in.role != ops::Role::loss || !in.input_shapes.count("output")) return;
  const Shape out = in.input_shapes.at("output");
  const double L = in.ref_loss, R = in.run_loss;
  if (!std::isfinite(L) || !std::isfinite(R)) return;
  s.family("loss");
  for (const Scale& sc : scales(out)) {
    Hypothesis h;
    h.code = sc.code;
    h.tensor = "loss";
    h.side = "numeric";
    h.family = "loss";
    h.spec = fmt::format("loss*{:g}", sc.factor);
    h.rank = 40;
    h.params = {{"factor", sc.factor}, {"divided_by", sc.count}};
    const double want = L * sc.factor;
    h.max_abs = std::fabs(R - want);
    h.checked = 1;
    h.confirmed_all = true;
    h.passes = h.max_abs <= std::max(1e-4 * std::fabs(want), in.loss_abs.value_or(0));
    h.beyond = h.passes ? 0 : 1;
    h.description = fmt::format("the run's loss is the reference's times {:g}", sc.factor);
    h.cause = "the loss taken as " + sc.words;
    h.fix = fmt::format("divide the sum of squares by the output's element count ({})",
                        shape_numel(out));
    s.add(std::move(h));
  }
  if (!in.inputs.count("target")) return;
  const ArrayView T = in.inputs.at("target");
  auto mse_of = [&](const std::vector<double>& y, bool round) {
    double sum = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      const double v = round ? round_to_logical(y[i], in.logical) : y[i];
      const double d = v - read_value(T, static_cast<std::int64_t>(i));
      sum += d * d;
    }
    return sum / static_cast<double>(y.size());
  };
  // The output computed with a narrow accumulator: on a bfloat16 or float16 case it can stay
  // inside the output's gate and still move the loss past its gate (the loss averages the errors'
  // squares and cross terms over every element). Recomputed in full, within full_forward_budget.
  // Not on float32 cases: there a narrow accumulator fails the output's own gate and is named on
  // the output. Meant for an output that PASSED: diagnosis_op.cpp drops it when the output failed.
  if (in.logical != DType::float32 && in.params && !in.output_failed) {
    // Every summation order the op's reference follows (ops::OpDef::sum_orders), the running sum
    // started at the bias as a hand-written loop starts it.
    const auto orders = ops::find(ops::op_of(*in.params)).sum_orders();
    // The variants share one full-forward budget (a failing loss pays at most about what the
    // unrounded-loss hypothesis below pays).
    const std::vector<Rounding> accs = accumulators_to_try(in.logical);
    DiagnosisInput shared = in;
    shared.full_forward_budget =
        in.full_forward_budget / static_cast<std::int64_t>(accs.size() * orders.size());
    for (Rounding acc : accs)
      for (const auto& order : orders) {
        std::vector<double> y;
        ops::ReferenceOptions opt;
        opt.accumulation = accumulation_of(acc);
        opt.order = order.order;
        opt.bias_first = true;
        if (!forward_all(shared, out, y, opt) || T.numel != static_cast<std::int64_t>(y.size())) break;
        const double want = mse_of(y, true);
        Hypothesis h = narrow_accumulation_hypothesis(acc, "output", order.name, order.words);
        h.tensor = "output";
        h.spec = fmt::format("loss(acc={})", rounding_name(acc));
        h.params["expected"] = want;
        h.rank = 42;  // after the simpler loss mistakes
        h.max_abs = std::fabs(R - want);
        h.checked = 1;
        h.confirmed_all = true;
        h.passes = R != L && h.max_abs <= 0.1 * std::fabs(R - L);
        h.beyond = h.passes ? 0 : 1;
        h.description = fmt::format("the run's loss equals the loss of an output accumulated in {} "
                                    "({:.9g}; order {})",
                                    rounding_name(acc), want, order.name);
        s.add(std::move(h));
      }
  }
  // The loss on the output before rounding to the case dtype.
  if (in.logical != DType::float32) {
    std::vector<double> y;
    const bool ok = forward_all(in, out, y);
    if (!ok) return;
    if (T.numel != static_cast<std::int64_t>(y.size())) return;
    const double want = mse_of(y, false);
    Hypothesis h;
    h.code = "loss_unrounded_output";
    h.tensor = "loss";
    h.side = "numeric";
    h.family = "loss";
    h.spec = "loss(unrounded output)";
    h.rank = 41;
    h.params = {{"dtype", dtype_name(in.logical)}, {"expected", want}};
    h.max_abs = std::fabs(R - want);
    h.checked = 1;
    h.confirmed_all = true;
    // The unrounded loss sits within ~1 ULP of the case dtype of the reference's; it explains the
    // run when it accounts for (nearly) all of the difference.
    h.passes = R != L && h.max_abs <= 0.1 * std::fabs(R - L);
    h.beyond = h.passes ? 0 : 1;
    h.description = fmt::format("the run's loss equals the loss on the output before rounding to "
                                "{} ({:.9g})",
                                dtype_name(in.logical), want);
    h.cause = "the loss taken on the unrounded (float32 or wider) output instead of the output as "
              "stored";
    h.fix = fmt::format("round the output to {} first, then take the loss on it (and dL/dy from it)",
                        dtype_name(in.logical));
    s.add(std::move(h));
  }
}

void search_gradient_scale(const DiagnosisInput& in, Search& s) {
  if (in.role != ops::Role::grad || !in.input_shapes.count("output") || in.run_shape != in.shape) return;
  s.family("gradient_scale");
  const std::int64_t numel = shape_numel(in.shape);
  const auto positions = sample_positions(numel, in.sample);
  for (const Scale& sc : scales(in.input_shapes.at("output"))) {
    ElementTest t = gate_test(in);
    t.floor = static_cast<float>(in.floor * sc.factor);
    t.atol = static_cast<float>(t.atol * sc.factor);
    t.max_ulp = ~std::uint64_t{0};
    if (!(t.rtol > 0)) t.rtol = 1e-3f;  // an atol/ULP-only gate: a relative test still applies
    if (t.bound) t.bound = t.bound->scaled(sc.factor);  // the correct gradient's freedom, scaled
    Eval e;
    for (std::int64_t p : positions) {
      e.add_at(p, static_cast<float>(read_value(in.ref, p) * sc.factor), read_value(in.run, p), t);
      if (e.beyond > 0 && e.checked >= 4) break;
    }
    Hypothesis h;
    h.code = sc.code;
    h.tensor = "loss";
    h.side = "numeric";
    h.family = "gradient_scale";
    h.spec = fmt::format("grad*{:g}", sc.factor);
    h.rank = 40;
    h.params = {{"factor", sc.factor}, {"divided_by", sc.count}};
    h.max_abs = e.max_abs;
    h.beyond = e.beyond;
    h.checked = e.checked;
    h.confirmed_all = e.checked == numel;
    h.passes = e.beyond == 0 && e.checked > 0;
    h.description = fmt::format("run {} is the reference's times {:g}", in.tensor, sc.factor);
    h.cause = "dL/doutput from the loss taken as " + sc.words;
    h.fix = fmt::format("use dL/dy = 2 (y - t) / {} (the output's element count)",
                        shape_numel(in.input_shapes.at("output")));
    s.add(std::move(h));
  }
}

}  // namespace validate::compare::detail
