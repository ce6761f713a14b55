// The oracle runner: layout plumbing around each op's float64 reference (harness/ops/<op>/ref_*.cpp). Inputs go canonical -> layout
// memory through the layout module (the same conversion every other runner uses), are widened
// exactly to float64 in place, and are addressed by the layout's per-axis strides; results are
// written in their layouts, rounded once to the storage dtype and converted back to canonical.
#include "validate/backends/oracle_runner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include <fmt/format.h>

#include "validate/ops/registry.hpp"
#include "validate/layout/convert.hpp"

namespace validate::runners {

namespace {

using ops::View;

int resolve_threads(int threads) {
  if (threads > 0) return threads;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw ? static_cast<int>(hw) : 1;
}

// A tensor of the op in float64, in its layout's memory order.
struct Held {
  std::string axes;
  Shape shape;  // canonical
  layout::Spec spec;
  std::vector<double> mem;
  View view;
};

// The spec must name exactly the tensor's canonical axes (parse_spec guarantees it for specs from
// a preset or a layout file; a hand-built set is checked here rather than asserted in placement()).
Status check_spec(const layout::Spec& spec, const std::string& axes, const std::string& tensor) {
  std::string a = spec.axes, b = axes;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  bool ok = a == b && std::adjacent_find(a.begin(), a.end()) == a.end();
  for (char f : spec.flip) ok = ok && axes.find(f) != std::string::npos;
  if (!ok)
    return Error{fmt::format("layout '{}' of tensor '{}' does not name its axes {}",
                             layout::to_string(spec), tensor, axes.empty() ? "(scalar)" : axes)};
  return Status::ok();
}

Held make_held(const cases::TensorInfo& t, const layout::Spec& spec) {
  Held h{t.canonical_axes,
         t.shape,
         spec,
         std::vector<double>(static_cast<std::size_t>(shape_numel(t.shape))),
         {}};
  const auto g = layout::from_layout_gather(layout::placement(spec, t.canonical_axes, t.shape));
  h.view.data = h.mem.data();
  h.view.offset = g.src_offset;
  for (std::size_t a = 0; a < g.src_strides.size() && a < 4; ++a)
    h.view.stride[a] = g.src_strides[a];
  return h;
}

// Canonical storage tensor -> layout memory (layout module) -> float64 (exact widening).
Held hold_input(const cases::TensorInfo& t, const layout::Spec& spec, const Tensor& canonical) {
  Held h = make_held(t, spec);
  const Tensor laid = layout::to_layout(canonical, t.canonical_axes, spec);
  if (laid.dtype() == DType::float32) {
    const float* src = laid.data<float>();
    for (std::size_t i = 0; i < h.mem.size(); ++i) h.mem[i] = src[i];
  } else {
    for (std::size_t i = 0; i < h.mem.size(); ++i)
      h.mem[i] = laid.get(static_cast<std::int64_t>(i));
  }
  return h;
}

// Layout memory (float64) -> one rounding to `dtype` -> canonical (layout module).
Tensor release(const Held& h, DType dtype) {
  const Shape lshape = layout::shape_in_layout(h.spec, h.axes, h.shape);
  Tensor laid(dtype, lshape);
  const std::size_t n = h.mem.size();
  switch (dtype) {
    case DType::float64:
      std::copy(h.mem.begin(), h.mem.end(), laid.data<double>());
      break;
    case DType::float32:
      for (std::size_t i = 0; i < n; ++i) laid.data<float>()[i] = static_cast<float>(h.mem[i]);
      break;
    case DType::float16:
      for (std::size_t i = 0; i < n; ++i)
        laid.data<std::uint16_t>()[i] = double_to_float16_bits(h.mem[i]);
      break;
    case DType::bfloat16:
      break;  // rejected by oracle_compute
  }
  return layout::from_layout(laid, h.axes, h.shape, h.spec);
}

Tensor scalar(double v, DType dtype) {
  Tensor t(dtype == DType::float64 ? DType::float64 : DType::float32, Shape{});
  t.set(0, v);  // one rounding, double -> float32
  return t;
}

class OracleRunner final : public Runner {
 public:
  OracleRunner(layout::LayoutSet layouts, OracleOptions opt)
      : layouts_(std::move(layouts)), opt_(opt) {}

  std::string name() const override { return "oracle"; }

  nlohmann::json info() const override {
    return {{"backend", "oracle"},
            {"device", "cpu"},
            {"math", "float64"},
            {"threads", resolve_threads(opt_.threads)},
            {"time_s", {{"compute", times_.compute_s}, {"conversion", times_.conversion_s}}},
            {"layout", layout::to_json(layouts_)}};
  }

  std::vector<OpResult> run(const OpTask& task) override {
    std::vector<OpResult> out(1);
    OpResult& r = out[0];
    const std::string op = cases::op_name(task.op);
    if (!layouts_.has_op(op)) {
      r.outcome = RunOutcome::skipped;
      r.message = "op not in the layout file";
      return out;
    }
    const layout::TensorSpecs& specs = layouts_.ops.find(op)->second;
    nlohmann::json used = nlohmann::json::object();
    for (const auto& t : task.c->tensors(task.op)) {
      if (t.role == cases::Role::loss_curve || t.role == cases::Role::checkpoint) continue;
      auto it = specs.find(t.name);
      used[t.name] = layout::to_string(
          it != specs.end() ? it->second : layout::canonical_spec(t.canonical_axes));
    }
    auto res = oracle_compute(*task.c, task.op, task.inputs, specs, storage_dtype(task.c->dtype),
                              opt_.threads, &times_);
    if (res && task.c->train) {
      auto traj = oracle_trajectory(*task.c, task.op, task.inputs, task.step_inputs, specs, storage_dtype(task.c->dtype),
                                    opt_.threads, &times_);
      if (traj) {
        for (auto& [name, t] : *traj) res->insert_or_assign(name, std::move(t));
      } else {
        res = traj.status();
      }
    }
    if (!res) {
      r.outcome = RunOutcome::error;
      r.message = res.message();
      return out;
    }
    r.outputs = std::move(*res);
    r.info = {{"compute", "float64"}, {"layouts", used}};
    return out;
  }

 private:
  layout::LayoutSet layouts_;
  OracleOptions opt_;
  OracleTimes times_;
};

}  // namespace

std::uint16_t double_to_float16_bits(double x) {
  // Rounded once from double; the result is a half, so the float32 conversion after it is exact.
  return float_to_float16_bits(static_cast<float>(round_to_dtype(x, DType::float16)));
}

Result<std::map<std::string, Tensor>> oracle_compute(
    const cases::Case& c, cases::Op op, const std::map<std::string, const Tensor*>& inputs,
    const layout::TensorSpecs& specs, DType result_dtype, int threads, OracleTimes* times,
    std::optional<DType> loss_on) {
  using Clock = std::chrono::steady_clock;
  const auto t_in = Clock::now();
  const std::string where =
      fmt::format("oracle {}/{} {}", dtype_name(c.dtype), c.name, cases::op_name(op));
  if (result_dtype == DType::bfloat16)
    return Error{
        where + ": results are float32, float16 or float64 (bfloat16 cases are stored as float32)"};
  const cases::OpInstance* inst = c.find(op);
  if (!inst) return Error{where + ": the case has no such op"};
  VALIDATE_TRY(cases::check_op(*inst, where));
  threads = resolve_threads(threads);

  std::map<std::string, Held> held;
  std::vector<cases::TensorInfo> produced;
  for (const auto& t : c.tensors(op)) {
    auto it = specs.find(t.name);
    const layout::Spec spec =
        it != specs.end() ? it->second : layout::canonical_spec(t.canonical_axes);
    // A training case's trajectory tensors come from oracle_trajectory, not from one step.
    if (t.role == cases::Role::loss_curve || t.role == cases::Role::checkpoint) continue;
    if (Status st = check_spec(spec, t.canonical_axes, t.name); !st)
      return Error{where + ": " + st.message()};
    if (t.role == cases::Role::loss) continue;
    if (t.role != cases::Role::input) {
      held.emplace(t.name, make_held(t, spec));
      produced.push_back(t);
      continue;
    }
    auto in = inputs.find(t.name);
    if (in == inputs.end() || in->second == nullptr)
      return Error{where + ": input '" + t.name + "' missing"};
    const Tensor& x = *in->second;
    if (x.shape() != t.shape)
      return Error{fmt::format("{}: input '{}' has shape {}, expected {}", where, t.name,
                               shape_to_string(x.shape()), shape_to_string(t.shape))};
    // float64: a training step's parameters (oracle_trajectory), exact already.
    if (x.dtype() != DType::float32 && x.dtype() != DType::float16 && x.dtype() != DType::float64)
      return Error{fmt::format("{}: input '{}' is {}, expected float32 or float16 storage", where,
                               t.name, dtype_name(x.dtype()))};
    held.emplace(t.name, hold_input(t, spec, x));
  }
  ops::Views views;
  for (const auto& [name, h] : held) views.emplace(name, h.view);

  // Runner results are the case's dtype, so the loss is taken on the output rounded to it, as the
  // reference's is; float64 results (oracle_compute's exact mode) keep the exact output.
  const auto t_compute = Clock::now();
  ops::ReferenceOptions ropt;
  ropt.threads = threads;
  ropt.loss_on = loss_on ? *loss_on : result_dtype == DType::float64 ? DType::float64 : c.dtype;
  const double loss = ops::find(op).reference(inst->params, views, ropt);

  const auto t_out = Clock::now();
  std::map<std::string, Tensor> out;
  for (const auto& t : produced) out.emplace(t.name, release(held.at(t.name), result_dtype));
  out.emplace("loss", scalar(loss, result_dtype));
  if (times) {
    const auto s = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
    times->conversion_s += s(t_compute - t_in) + s(Clock::now() - t_out);
    times->compute_s += s(t_out - t_compute);
  }
  return out;
}

std::unique_ptr<Runner> make_oracle_runner(const layout::LayoutSet& layouts) {
  return make_oracle_runner(layouts, OracleOptions{});
}

std::unique_ptr<Runner> make_oracle_runner(const layout::LayoutSet& layouts,
                                           const OracleOptions& opt) {
  return std::make_unique<OracleRunner>(layouts, opt);
}

}  // namespace validate::runners
