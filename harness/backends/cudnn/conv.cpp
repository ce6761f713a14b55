// conv2d and conv_transpose2d through cuDNN: the algorithm selection over one case's executions
// (single step, every variant of --algo all, --repeat), then, for a training case, each variant's
// trajectory (conv_train.cpp). The case itself — plans, descriptors, buffers, execution — is
// conv_case.hpp.
#include <optional>

#include <fmt/format.h>

#include "conv_case.hpp"

namespace validate::runners::cudnn_detail {

namespace {

nlohmann::json choice_json(Direction d, const Choice& c) {
  return {{"algo", algo_name(d, c.algo)},
          {"selected_by", c.selected_by},
          {"workspace_bytes", c.workspace},
          {"deterministic", c.deterministic},
          {"math_type", math_type_name(c.math)},
          {"heuristic_math_type", math_type_name(c.heuristic_math)}};
}

// What ran, per direction: info["algorithms"] {tensor -> family} (the error bounds read it),
// info["cudnn_algorithms"] {tensor -> cuDNN's enum name}, and how each was chosen under
// info["algorithm_selection"][direction].
void record_algorithms(nlohmann::json& info, const Combo& combo, bool transposed) {
  for (Direction d : kDirections) {
    const Choice& c = combo.c[static_cast<int>(d)];
    info["algorithms"][produced_tensor(d, transposed)] = algorithm_family(d, c.algo);
    info["cudnn_algorithms"][produced_tensor(d, transposed)] = cudnn_enum_name(d, c.algo);
    info["algorithm_selection"][direction_name(d)] = choice_json(d, c);
  }
}

}  // namespace

std::vector<OpResult> run_conv(Context& ctx, const OpTask& task) {
  nlohmann::json info{{"device", fmt::format("cuda:{}", ctx.device.index)}, {"backend", "cudnn"}};
  std::map<std::string, std::string> paths;  // known once the case is set up
  auto single = [&](RunOutcome o, const std::string& msg) {
    OpResult r;
    r.outcome = o;
    r.message = msg;
    r.info = info;
    r.notes.paths = paths;
    std::vector<OpResult> v;
    v.push_back(std::move(r));
    return v;
  };
  if (task.c->dtype == DType::float64)
    return single(RunOutcome::unsupported, "the cudnn runner runs float32, bfloat16 and float16");
  const bool transposed = task.op == cases::Op::conv_transpose2d;
  const char* op = transposed ? "conv_transpose2d" : "conv2d";
  if (!ctx.layouts.has_op(op))
    return single(RunOutcome::skipped, std::string("the layout set has no ") + op);
  // A training case trains on the device (conv_train.cpp) or says why not: never the single
  // step's results alone, which would leave every trajectory tensor "not produced".
  std::optional<TrainPlan> plan;
  if (task.c->train) {
    auto tp = plan_training(*task.c, task.op);
    if (!tp) return single(RunOutcome::unsupported, "training: " + tp.message());
    plan = std::move(*tp);
  }

  ConvCase cc(ctx, task);
  if (Status st = cc.setup(info); !st) return single(RunOutcome::error, st.message());
  paths = cc.paths();

  // Every execution is a real run (with --repeat); the selection keeps the ones it reports.
  std::vector<OpResult> attempts;
  auto try_combo = [&](const Combo& combo) -> Attempt {
    OpResult r;
    r.info = info;
    r.notes.paths = cc.paths();
    record_algorithms(r.info, combo, transposed);
    // --repeat: the same algorithms again; any bit that moves is cuDNN nondeterminism (ALGO_0 and
    // ALGO_3 accumulate with atomics).
    run_repeated(ctx, r, [&](nlohmann::json* timing) { return cc.execute(combo, timing); });
    Attempt a;
    if (r.outcome != RunOutcome::ok) {
      const Failure& f = cc.last_failure();
      a.kind = f.set && f.not_supported ? Attempt::unsupported : Attempt::error;
      a.direction = f.direction;
      a.message = r.message;
    }
    attempts.push_back(std::move(r));
    return a;
  };
  const AlgoRequest(&req)[3] = ctx.parsed.algo;
  Selection sel = select_algorithms(cc.table(), req, try_combo);
  const bool listed_but_refused =
      !sel.dropped[0].empty() || !sel.dropped[1].empty() || !sel.dropped[2].empty();
  if (sel.outcome == Attempt::unsupported && listed_but_refused) {
    // Listed but not executable for the layouts as given (e.g. a strided CHWN:F activation):
    // convert to NCHW and choose again, as setup does when nothing is listed at all.
    auto fell = cc.fall_back(sel.message, info);
    if (!fell) return single(RunOutcome::error, fell.message());
    paths = cc.paths();
    if (*fell) {
      attempts.clear();
      const std::string first = sel.message;
      sel = select_algorithms(cc.table(), req, try_combo);
      if (sel.outcome == Attempt::unsupported)
        sel.message += " (after the NCHW fallback; the layouts as given: " + first + ")";
    }
  }
  if (sel.outcome == Attempt::unsupported) {
    for (Direction d : kDirections)
      if (!sel.dropped[static_cast<int>(d)].empty())
        info["algorithms_not_supported_when_executed"][direction_name(d)] =
            sel.dropped[static_cast<int>(d)];
    return single(RunOutcome::unsupported, sel.message);
  }

  std::vector<OpResult> results;
  for (const Planned& p : sel.results) {
    OpResult r;
    if (p.attempt_index >= 0) {
      r = std::move(attempts[static_cast<std::size_t>(p.attempt_index)]);
    } else {
      r.info = info;
      r.notes.paths = paths;
      record_algorithms(r.info, p.combo, transposed);
    }
    r.variant = p.variant;
    if (p.attempt.kind == Attempt::unsupported) {
      // Listed by the heuristics, refused when executed: a fact about cuDNN, not a failure.
      r.outcome = RunOutcome::unsupported;
      r.outputs.clear();
      r.message = fmt::format(
          "{} algorithm {}: {}", direction_name(p.attempt.direction),
          algo_name(p.attempt.direction, p.combo.c[static_cast<int>(p.attempt.direction)].algo),
          p.attempt.message);
    }
    for (Direction d : kDirections) {
      const int i = static_cast<int>(d);
      if (!cc.table().rejected[i].empty())
        r.info["algorithms_left_out"][direction_name(d)] = cc.table().rejected[i];
      if (!sel.dropped[i].empty())
        r.info["algorithms_not_supported_when_executed"][direction_name(d)] = sel.dropped[i];
    }
    // Each variant that ran trains from the same initial parameters with its own algorithms; the
    // single-step executions above are all done, so the buffers are free to be reused.
    if (plan && r.outcome == RunOutcome::ok) {
      if (Status st = train_conv(cc, task, *plan, p.combo, r); !st) {
        r.outcome = RunOutcome::error;
        r.message = "training trajectory: " + st.message();
        r.outputs.clear();
      }
    }
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace validate::runners::cudnn_detail
