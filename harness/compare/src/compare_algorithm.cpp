// The error-bound model of the algorithm a run declares for a tensor (compare_algorithm.hpp).
#include "compare_algorithm.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

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

// The conv2d whose passes compute the op: conv2d itself; conv_transpose2d as cuDNN runs it, the
// backward-data pass of the conv2d of the same weight whose output has the transposed op's input
// shape (its stride, padding and dilation; no output padding at stride 1). nullopt for matmul.
struct ConvView {
  ops::ConvParams conv;
  bool transposed = false;
};

std::optional<ConvView> conv_view(const ops::OpParams& p) {
  if (const auto* c = std::get_if<ops::ConvParams>(&p)) return ConvView{*c, false};
  const auto* t = std::get_if<ops::ConvTransposeParams>(&p);
  if (!t) return std::nullopt;
  ops::ConvParams c;
  c.n = t->n, c.c = t->o, c.h = t->hout(), c.w = t->wout(), c.o = t->c, c.kh = t->kh, c.kw = t->kw;
  c.stride = t->stride, c.padding = t->padding, c.dilation = t->dilation, c.groups = t->groups, c.bias = t->bias;
  return ConvView{c, true};
}

// The pass of the view's conv2d that computes `tensor` (grad_bias: none, a plain sum).
std::optional<ConvPass> pass_of(const std::string& tensor, bool transposed) {
  if (tensor == "output") return transposed ? ConvPass::backward_data : ConvPass::forward;
  if (tensor == "grad_input") return transposed ? ConvPass::forward : ConvPass::backward_data;
  if (tensor == "grad_weight") return ConvPass::backward_filter;
  return std::nullopt;
}

struct Inputs {
  std::vector<double> x, w, dy;  // the view's conv2d operands (ConvOperands)
  ConvShape shape;
};

// The view's operands from the reference: the op's weight, and dL/dy = 2 (y - t) / numel of the
// MSE loss from its stored output and target. conv2d: x its input, dy that dL/dy; a transposed
// op's dL/dy is the view's x (its output is the view's input space) and its input the view's dy.
Result<Inputs> conv_inputs(const PairItem& it, const std::string& op, const ConvView& v) {
  Inputs in;
  const ops::ConvParams& p = v.conv;
  in.shape = ConvShape{p.n, p.c, p.h, p.w, p.o, p.kh, p.kw, p.padding[0], p.padding[1], p.groups};
  auto x = load_reference(it, op, "input");
  if (!x) return x.status();
  auto w = load_reference(it, op, "weight");
  if (!w) return w.status();
  auto y = load_reference(it, op, "output");
  if (!y) return y.status();
  auto t = load_reference(it, op, "target");
  if (!t) return t.status();
  if (y->size() != t->size()) return Error{"reference: output and target differ in element count"};
  std::vector<double> dy(y->size());
  const double scale = 2.0 / static_cast<double>(std::max<std::size_t>(y->size(), 1));
  for (std::size_t i = 0; i < y->size(); ++i) dy[i] = scale * ((*y)[i] - (*t)[i]);
  in.w = std::move(*w);
  in.x = v.transposed ? std::move(dy) : std::move(*x);
  in.dy = v.transposed ? std::move(*x) : std::move(dy);
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
// the geometry admits (p: the op's own parameters).
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

Result<std::shared_ptr<const Inputs>> cached_inputs(const PairItem& it, const std::string& op, const ConvView& v) {
  const std::string key = op_key(it, op);
  {
    std::lock_guard<std::mutex> lock(cache_mu);
    if (op_cache().key == key && op_cache().inputs) return op_cache().inputs;
  }
  auto in = conv_inputs(it, op, v);
  if (!in) return in.status();
  auto shared = std::make_shared<const Inputs>(std::move(*in));
  std::lock_guard<std::mutex> lock(cache_mu);
  if (op_cache().key != key) op_cache() = OpCache{key, nullptr, {}};
  op_cache().inputs = shared;
  return shared;
}

std::shared_ptr<const ForwardTerm> forward_term(const PairItem& it, const std::string& op, AlgorithmKind kind,
                                                const std::string& name, const ops::OpParams& p, ConvPass pass,
                                                const Inputs& in, int threads) {
  const std::string key = op_key(it, op);
  {
    std::lock_guard<std::mutex> lock(cache_mu);
    if (op_cache().key == key)
      if (auto f = op_cache().forward.find(name); f != op_cache().forward.end()) return f->second;
  }
  auto t = std::make_shared<ForwardTerm>();
  t->value = largest_term(kind, p, pass, in, threads, t->used, t->missing);
  std::lock_guard<std::mutex> lock(cache_mu);
  if (op_cache().key != key) op_cache() = OpCache{key, nullptr, {}};
  op_cache().forward[name] = t;
  return t;
}

bool has_term(AlgorithmKind k) { return cases::is_winograd(k) || cases::is_fft(k) || k == AlgorithmKind::any; }

}  // namespace

namespace {

// The op's output term carried into gradient `tensor` through dL/dy (algorithm_bounds.hpp,
// carried_term and carried_term_transposed).
std::vector<double> carried(const std::string& tensor, const ConvView& v, const Inputs& in,
                            const std::vector<double>& t_out, int threads) {
  const CarriedInto into = tensor == "grad_input"    ? CarriedInto::grad_input
                           : tensor == "grad_weight" ? CarriedInto::grad_weight
                                                     : CarriedInto::grad_bias;
  const ConvOperands ops{&in.x, &in.w, &in.dy};
  return v.transposed ? carried_term_transposed(into, in.shape, ops, t_out, threads)
                      : carried_term(into, in.shape, ops, t_out, threads);
}

std::int64_t output_numel(const ConvView& v) {
  const ops::ConvParams& c = v.conv;
  return v.transposed ? c.n * c.c * c.h * c.w : c.n * c.o * c.hout() * c.wout();
}

// What a tensor's bound needs to know of the run and the op.
struct Declared {
  cases::Algorithm own, fwd;      // the tensor's algorithm and the op output's
  std::string fwd_name = "direct";
  const cases::OpInstance* inst = nullptr;
  std::optional<ConvView> view;
};

Result<Declared> declared(const PairItem& it, const cases::OpRunRecord& opr, const std::string& tensor,
                          AlgorithmBound& ab) {
  Declared d;
  auto alg = recorded(it, opr, tensor, ab.algorithm);
  if (!alg) return alg.status();
  d.own = *alg;
  const bool gradient = tensor == "grad_input" || tensor == "grad_weight" || tensor == "grad_bias";
  auto fwd = gradient ? recorded(it, opr, "output", d.fwd_name) : Result<cases::Algorithm>(cases::Algorithm{});
  if (!fwd) return fwd.status();
  d.fwd = *fwd;
  d.inst = it.ref->c.find(*it.op);
  if (d.inst) d.view = conv_view(d.inst->params);
  return d;
}

// The bound model of `tensor` (of `numel` elements) of the op, as algorithm_bound.
Result<AlgorithmBound> tensor_bound(const PairItem& it, const std::string& tensor, const std::string& op,
                                    std::int64_t numel, double lambda, int threads) {
  AlgorithmBound ab;
  if (!it.run || !it.op) return ab;
  const cases::OpRunRecord* opr = it.run->op(*it.op);
  if (!opr) return ab;
  auto d = declared(it, *opr, tensor, ab);
  if (!d) return d.status();
  if (d->own.kind == AlgorithmKind::split_k) ab.model = "direct (split-K: any order of the same float32 sums)";
  const std::optional<ConvPass> pass = d->view ? pass_of(tensor, d->view->transposed) : std::nullopt;
  // A forward term exists only where the output's algorithm applies (a strided convolution
  // declared "any" has none: it is direct).
  const bool own = has_term(d->own.kind),
             carried_in = d->view && has_term(d->fwd.kind) && cases::applicable(d->fwd.kind, d->inst->params) &&
                          !members(d->fwd.kind, d->inst->params).empty();
  const bool own_term = own && pass && cases::applicable(d->own.kind, d->inst->params);
  if (own && !own_term)
    ab.model = fmt::format("direct ({} has no model for {} of {})", ab.algorithm, tensor, op);
  if (!own_term && !carried_in) return ab;  // the view is set from here on
  auto in = cached_inputs(it, op, *d->view);
  if (!in) return in.status();
  const Inputs& ins = **in;
  const ConvPass out_pass = *pass_of("output", d->view->transposed);
  if (own_term) {
    std::vector<std::string> used, missing;
    if (*pass == out_pass) {  // the gradients' carried term needs the same: computed once
      const auto f = forward_term(it, op, d->own.kind, ab.algorithm, d->inst->params, out_pass, ins, threads);
      ab.extra = f->value, used = f->used, missing = f->missing;
    } else {
      ab.extra = largest_term(d->own.kind, d->inst->params, *pass, ins, threads, used, missing);
    }
    ab.model = model_name(used);
    if (!missing.empty()) ab.model += fmt::format(" (no {} model for {})", fmt::join(missing, ", "), tensor);
  }
  if (carried_in) {
    // The forward's own error moves dL/dy = 2 (y - t) / N and so this gradient; the two sources
    // are independent of each other but added, conservatively.
    const auto t_out = forward_term(it, op, d->fwd.kind, d->fwd_name, d->inst->params, out_pass, ins, threads);
    if (static_cast<std::int64_t>(t_out->value.size()) != output_numel(*d->view))
      return Error{fmt::format("the {} term of output has {} elements, the output {}", d->fwd_name,
                               t_out->value.size(), output_numel(*d->view))};
    const std::vector<double> c = carried(tensor, *d->view, ins, t_out->value, threads);
    if (ab.extra.empty()) ab.extra.assign(c.size(), 0.0);
    for (std::size_t i = 0; i < c.size() && i < ab.extra.size(); ++i) ab.extra[i] += c[i];
    ab.model += fmt::format(" + the output's {} error through dL/dy", d->fwd_name);
    ab.carried_output = true;
  }
  for (double& v : ab.extra) v *= lambda;
  if (!ab.extra.empty() && static_cast<std::int64_t>(ab.extra.size()) != numel)
    return Error{fmt::format("the {} term of {} has {} elements, the tensor {}", ab.algorithm, tensor,
                             ab.extra.size(), numel)};
  return ab;
}

}  // namespace

Result<AlgorithmBound> algorithm_bound(const PairItem& it, const Entry& e, double lambda, int threads) {
  return tensor_bound(it, it.tensor, e.op_name(), shape_numel(e.shape), lambda, threads);
}

Result<AlgorithmBound> output_algorithm_bound(const PairItem& it, double lambda, int threads) {
  if (!it.op || !it.ref) return AlgorithmBound{};
  std::int64_t numel = 0;
  for (const auto& t : it.ref->c.tensors(*it.op))
    if (t.role == ops::Role::output) numel = shape_numel(t.shape);
  return tensor_bound(it, "output", ops::op_name(*it.op), numel, lambda, threads);
}

}  // namespace validate::compare::detail
