// The error-bound model of the algorithm a run declares for a tensor (compare_algorithm.hpp).
#include "compare_algorithm.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comparer.hpp"
#include "validate/cases/algorithm.hpp"
#include "validate/core/json_io.hpp"
#include "validate/metrics/algorithm_bounds.hpp"

namespace validate::compare::detail {

namespace {

namespace stdfs = std::filesystem;
using cases::AlgorithmKind;

// A reference tensor of the op as float64 (canonical layout).
Result<std::vector<double>> load_reference(const PairItem& it, const std::string& op, const std::string& name) {
  const Json* f = find_path(it.ref->metadata, {"ops", op.c_str(), "tensors", name.c_str(), "file"});
  if (!f || !f->is_string())
    return Error{fmt::format("reference: {} has no tensor {} of {} (an algorithm's bound needs it)", it.ref->c.name,
                             name, op)};
  const std::string path = (stdfs::path(it.ref_file).parent_path() / f->get<std::string>()).string();
  auto m = open_npy(path);
  if (!m) return Error{"reference: " + m.message()};
  const ArrayView v = m->view();
  std::vector<double> out(static_cast<std::size_t>(v.numel));
  for (std::int64_t i = 0; i < v.numel; ++i) out[static_cast<std::size_t>(i)] = value_at(v, i);
  return out;
}

struct Inputs {
  std::vector<double> x, w, dy;
  ConvShape shape;
};

// x, w and dL/dy = 2 (y - t) / numel of the MSE loss, from the reference's stored output.
Result<Inputs> conv_inputs(const PairItem& it, const std::string& op, const ops::ConvParams& p) {
  Inputs in;
  in.shape = ConvShape{p.n, p.c, p.h, p.w, p.o, p.kh, p.kw, p.padding[0], p.padding[1], p.groups};
  auto x = load_reference(it, op, "input");
  if (!x) return x.status();
  auto w = load_reference(it, op, "weight");
  if (!w) return w.status();
  in.x = std::move(*x), in.w = std::move(*w);
  auto y = load_reference(it, op, "output");
  if (!y) return y.status();
  auto t = load_reference(it, op, "target");
  if (!t) return t.status();
  if (y->size() != t->size()) return Error{"reference: output and target differ in element count"};
  in.dy.resize(y->size());
  const double scale = 2.0 / static_cast<double>(std::max<std::size_t>(y->size(), 1));
  for (std::size_t i = 0; i < y->size(); ++i) in.dy[i] = scale * ((*y)[i] - (*t)[i]);
  return in;
}

// One algorithm's term, or empty when it has no model for this pass. `name` gets what was used.
std::vector<double> term(AlgorithmKind k, ConvPass pass, const Inputs& in, int threads, std::string& name) {
  const ConvOperands ops{&in.x, &in.w, &in.dy};
  switch (k) {
    case AlgorithmKind::winograd_f2: name = "winograd F(2x2,3x3)"; return winograd_term(2, pass, in.shape, ops, threads);
    case AlgorithmKind::winograd_f4: name = "winograd F(4x4,3x3)"; return winograd_term(4, pass, in.shape, ops, threads);
    case AlgorithmKind::winograd_f6: name = "winograd F(6x6,3x3)"; return winograd_term(6, pass, in.shape, ops, threads);
    case AlgorithmKind::fft: name = "fft (whole plane)"; return fft_term(0, pass, in.shape, ops);
    case AlgorithmKind::fft_tiling: name = "fft_tiling (32x32)"; return fft_term(32, pass, in.shape, ops);
    default: return {};
  }
}

// The algorithms a declared one stands for: "winograd" every tile size, "any" every algorithm
// the geometry admits.
std::vector<AlgorithmKind> members(AlgorithmKind k, const ops::OpParams& p) {
  const std::vector<AlgorithmKind> wino{AlgorithmKind::winograd_f2, AlgorithmKind::winograd_f4,
                                        AlgorithmKind::winograd_f6};
  if (k == AlgorithmKind::winograd) return wino;
  if (k != AlgorithmKind::any) return {k};
  std::vector<AlgorithmKind> out;
  for (AlgorithmKind a : {AlgorithmKind::winograd_f2, AlgorithmKind::winograd_f4, AlgorithmKind::winograd_f6,
                          AlgorithmKind::fft, AlgorithmKind::fft_tiling})
    if (cases::applicable(a, p)) out.push_back(a);
  return out;
}

}  // namespace

namespace {

// The largest term, per element, of the algorithms `alg` stands for, for one pass; `used` and
// `missing` name those with and without a model. Empty when none has one.
std::vector<double> largest_term(AlgorithmKind alg, const ops::OpParams& p, ConvPass pass, const Inputs& in,
                                 int threads, std::vector<std::string>& used, std::vector<std::string>& missing) {
  std::vector<double> out;
  for (AlgorithmKind k : members(alg, p)) {
    std::string name;
    std::vector<double> t = term(k, pass, in, threads, name);
    if (t.empty()) {
      missing.push_back(cases::algorithm_name(cases::Algorithm{k, 0}));
      continue;
    }
    used.push_back(name);
    if (out.empty()) out.assign(t.size(), 0.0);
    for (std::size_t i = 0; i < t.size() && i < out.size(); ++i) out[i] = std::max(out[i], t[i]);
  }
  return out;
}

std::string model_name(const std::vector<std::string>& used) {
  if (used.empty()) return "direct";
  if (used.size() == 1) return "direct + " + used[0];
  return "direct + max(" + fmt::format("{}", fmt::join(used, ", ")) + ")";
}

// The algorithm the run names for `tensor` of the op (direct when none), or an error naming the
// record.
Result<cases::Algorithm> recorded(const PairItem& it, const cases::OpRunRecord& opr, const std::string& tensor,
                                  std::string& name) {
  auto found = opr.notes.algorithms.find(tensor);
  if (found == opr.notes.algorithms.end()) return cases::Algorithm{};
  name = found->second;
  auto alg = cases::parse_algorithm(name);
  if (!alg)
    return Error{fmt::format("{}: info.algorithms.{} is '{}', not an algorithm ({})", it.run->path, tensor, name,
                             fmt::join(cases::algorithm_names(), ", "))};
  return *alg;
}

// What one op's terms need and give more than once: the reference's inputs (read for every
// tensor of the op with a term) and the forward's term per algorithm (the output's own and each
// gradient's carried one). compare evaluates an op's tensors one after another, so one op is kept:
// it depends on the reference set and the algorithm only, so a run's variants share it too.
struct ForwardTerm {
  std::vector<double> value;
  std::vector<std::string> used, missing;
};
struct OpCache {
  std::string key;
  std::shared_ptr<const Inputs> inputs;
  std::map<std::string, std::shared_ptr<const ForwardTerm>> forward;
};

std::mutex cache_mu;
OpCache& op_cache() {
  static OpCache cache;
  return cache;
}

std::string op_key(const PairItem& it, const std::string& op) {
  return stdfs::path(it.ref_file).parent_path().string() + "/" + it.ref->c.name + "/" + op;
}

Result<std::shared_ptr<const Inputs>> cached_inputs(const PairItem& it, const std::string& op, const ops::ConvParams& p) {
  const std::string key = op_key(it, op);
  {
    std::lock_guard<std::mutex> lock(cache_mu);
    if (op_cache().key == key && op_cache().inputs) return op_cache().inputs;
  }
  auto in = conv_inputs(it, op, p);
  if (!in) return in.status();
  auto shared = std::make_shared<const Inputs>(std::move(*in));
  std::lock_guard<std::mutex> lock(cache_mu);
  if (op_cache().key != key) op_cache() = OpCache{key, nullptr, {}};
  op_cache().inputs = shared;
  return shared;
}

std::shared_ptr<const ForwardTerm> forward_term(const PairItem& it, const std::string& op, AlgorithmKind kind,
                                                const std::string& name, const ops::OpParams& p, const Inputs& in,
                                                int threads) {
  const std::string key = op_key(it, op);
  {
    std::lock_guard<std::mutex> lock(cache_mu);
    if (op_cache().key == key)
      if (auto f = op_cache().forward.find(name); f != op_cache().forward.end()) return f->second;
  }
  auto t = std::make_shared<ForwardTerm>();
  t->value = largest_term(kind, p, ConvPass::forward, in, threads, t->used, t->missing);
  std::lock_guard<std::mutex> lock(cache_mu);
  if (op_cache().key != key) op_cache() = OpCache{key, nullptr, {}};
  op_cache().forward[name] = t;
  return t;
}

bool has_term(AlgorithmKind k) { return cases::is_winograd(k) || cases::is_fft(k) || k == AlgorithmKind::any; }

}  // namespace

Result<AlgorithmBound> algorithm_bound(const PairItem& it, const Entry& e, double lambda, int threads) {
  AlgorithmBound ab;
  if (!it.run || !it.op) return ab;
  const cases::OpRunRecord* opr = it.run->op(*it.op);
  if (!opr) return ab;
  auto alg = recorded(it, *opr, it.tensor, ab.algorithm);
  if (!alg) return alg.status();
  if (alg->kind == AlgorithmKind::split_k) ab.model = "direct (split-K: any order of the same float32 sums)";
  const cases::OpInstance* inst = it.ref->c.find(*it.op);
  const auto* conv = inst ? std::get_if<ops::ConvParams>(&inst->params) : nullptr;
  const bool gradient = it.tensor == "grad_input" || it.tensor == "grad_weight" || it.tensor == "grad_bias";
  std::string fwd_name = "direct";
  auto fwd = gradient ? recorded(it, *opr, "output", fwd_name) : Result<cases::Algorithm>(cases::Algorithm{});
  if (!fwd) return fwd.status();
  // A forward term exists only where some member of the output's algorithm applies (a strided
  // convolution declared "any" has none: it is direct).
  const bool own = has_term(alg->kind),
             carried = conv && has_term(fwd->kind) && !members(fwd->kind, inst->params).empty() &&
                       cases::applicable(AlgorithmKind::fft, inst->params) && cases::applicable(fwd->kind, inst->params);
  if (!own && !carried) return ab;
  const bool modelled = conv && (it.tensor == "output" || it.tensor == "grad_input" || it.tensor == "grad_weight");
  if (own && (!modelled || !cases::applicable(alg->kind, inst->params)))
    ab.model = fmt::format("direct ({} has no model for {} of {})", ab.algorithm, it.tensor, e.op_name());
  const ConvPass pass = it.tensor == "output"       ? ConvPass::forward
                        : it.tensor == "grad_input" ? ConvPass::backward_data
                                                    : ConvPass::backward_filter;
  const bool own_term = own && modelled && cases::applicable(alg->kind, inst->params);
  if (!own_term && !carried) return ab;  // conv is set from here on: both need a conv2d
  auto in = cached_inputs(it, e.op_name(), *conv);
  if (!in) return in.status();
  const Inputs& ins = **in;
  if (own_term) {
    std::vector<std::string> used, missing;
    if (pass == ConvPass::forward) {  // the gradients' carried term needs the same: computed once
      const auto f = forward_term(it, e.op_name(), alg->kind, ab.algorithm, inst->params, ins, threads);
      ab.extra = f->value, used = f->used, missing = f->missing;
    } else {
      ab.extra = largest_term(alg->kind, inst->params, pass, ins, threads, used, missing);
    }
    ab.model = model_name(used);
    if (!missing.empty()) ab.model += fmt::format(" (no {} model for {})", fmt::join(missing, ", "), it.tensor);
  }
  if (carried) {
    // The forward's own error moves dL/dy = 2 (y - t) / N and so this gradient (algorithm_bounds.hpp,
    // carried_term); the two sources are independent of each other but added, conservatively.
    const auto t_out = forward_term(it, e.op_name(), fwd->kind, fwd_name, inst->params, ins, threads);
    if (static_cast<std::int64_t>(t_out->value.size()) != conv->n * conv->o * conv->hout() * conv->wout())
      return Error{fmt::format("the {} term of output has {} elements, the output {}", fwd_name, t_out->value.size(),
                               conv->n * conv->o * conv->hout() * conv->wout())};
    const std::vector<double> c = carried_term(it.tensor == "grad_input"    ? CarriedInto::grad_input
                                               : it.tensor == "grad_weight" ? CarriedInto::grad_weight
                                                                            : CarriedInto::grad_bias,
                                               ins.shape, ConvOperands{&ins.x, &ins.w, &ins.dy}, t_out->value, threads);
    if (ab.extra.empty()) ab.extra.assign(c.size(), 0.0);
    for (std::size_t i = 0; i < c.size() && i < ab.extra.size(); ++i) ab.extra[i] += c[i];
    ab.model += fmt::format(" + the output's {} error through dL/dy", fwd_name);
  }
  for (double& v : ab.extra) v *= lambda;
  if (!ab.extra.empty() && static_cast<std::int64_t>(ab.extra.size()) != shape_numel(e.shape))
    return Error{fmt::format("the {} term of {} has {} elements, the tensor {}", ab.algorithm, it.tensor,
                             ab.extra.size(), shape_numel(e.shape))};
  return ab;
}

}  // namespace validate::compare::detail
