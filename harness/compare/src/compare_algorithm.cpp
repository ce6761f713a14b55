// The error-bound model of the algorithm a run declares for a tensor (compare_algorithm.hpp).
#include "compare_algorithm.hpp"

#include <algorithm>
#include <filesystem>

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
Result<Inputs> conv_inputs(const PairItem& it, const std::string& op, const ops::ConvParams& p, ConvPass pass) {
  Inputs in;
  in.shape = ConvShape{p.n, p.c, p.h, p.w, p.o, p.kh, p.kw, p.padding[0], p.padding[1], p.groups};
  auto x = load_reference(it, op, "input");
  if (!x) return x.status();
  auto w = load_reference(it, op, "weight");
  if (!w) return w.status();
  in.x = std::move(*x), in.w = std::move(*w);
  if (pass != ConvPass::forward) {
    auto y = load_reference(it, op, "output");
    if (!y) return y.status();
    auto t = load_reference(it, op, "target");
    if (!t) return t.status();
    if (y->size() != t->size()) return Error{"reference: output and target differ in element count"};
    in.dy.resize(y->size());
    const double scale = 2.0 / static_cast<double>(std::max<std::size_t>(y->size(), 1));
    for (std::size_t i = 0; i < y->size(); ++i) in.dy[i] = scale * ((*y)[i] - (*t)[i]);
  }
  return in;
}

// One algorithm's term, or empty when it has no model for this pass. `name` gets what was used.
std::vector<double> term(AlgorithmKind k, ConvPass pass, const Inputs& in, std::string& name) {
  const ConvOperands ops{&in.x, &in.w, &in.dy};
  switch (k) {
    case AlgorithmKind::winograd_f2: name = "winograd F(2x2,3x3)"; return winograd_term(2, pass, in.shape, ops);
    case AlgorithmKind::winograd_f4: name = "winograd F(4x4,3x3)"; return winograd_term(4, pass, in.shape, ops);
    case AlgorithmKind::winograd_f6: name = "winograd F(6x6,3x3)"; return winograd_term(6, pass, in.shape, ops);
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

Result<AlgorithmBound> algorithm_bound(const PairItem& it, const Entry& e, double lambda) {
  AlgorithmBound ab;
  if (!it.run || !it.op) return ab;
  const cases::OpRunRecord* opr = it.run->op(*it.op);
  if (!opr) return ab;
  auto found = opr->notes.algorithms.find(it.tensor);
  if (found == opr->notes.algorithms.end()) return ab;
  ab.algorithm = found->second;
  auto alg = cases::parse_algorithm(ab.algorithm);
  if (!alg)
    return Error{fmt::format("{}: info.algorithms.{} is '{}', not an algorithm ({})", it.run->path, it.tensor,
                             ab.algorithm, fmt::join(cases::algorithm_names(), ", "))};
  if (alg->kind == AlgorithmKind::direct) return ab;
  if (alg->kind == AlgorithmKind::split_k) {
    ab.model = "direct (split-K: any order of the same float32 sums)";
    return ab;
  }
  const cases::OpInstance* inst = it.ref->c.find(*it.op);
  const auto* conv = inst ? std::get_if<ops::ConvParams>(&inst->params) : nullptr;
  const ConvPass pass = it.tensor == "output"       ? ConvPass::forward
                        : it.tensor == "grad_input" ? ConvPass::backward_data
                                                    : ConvPass::backward_filter;
  const bool modelled = conv && (it.tensor == "output" || it.tensor == "grad_input" || it.tensor == "grad_weight");
  if (!modelled || !cases::applicable(alg->kind, inst->params)) {
    ab.model = fmt::format("direct ({} has no model for {} of {})", ab.algorithm, it.tensor, e.op_name());
    return ab;
  }
  auto in = conv_inputs(it, e.op_name(), *conv, pass);
  if (!in) return in.status();
  std::vector<std::string> used, missing;
  for (AlgorithmKind k : members(alg->kind, inst->params)) {
    std::string name;
    std::vector<double> t = term(k, pass, *in, name);
    if (t.empty()) {
      missing.push_back(cases::algorithm_name(cases::Algorithm{k, 0}));
      continue;
    }
    used.push_back(name);
    if (ab.extra.empty()) ab.extra.assign(t.size(), 0.0);
    for (std::size_t i = 0; i < t.size() && i < ab.extra.size(); ++i) ab.extra[i] = std::max(ab.extra[i], lambda * t[i]);
  }
  ab.model = used.empty() ? "direct" : "direct + " + fmt::format("{}", fmt::join(used, " | "));
  if (used.size() > 1) ab.model = "direct + max(" + fmt::format("{}", fmt::join(used, ", ")) + ")";
  if (!missing.empty()) ab.model += fmt::format(" (no {} model for {})", fmt::join(missing, ", "), it.tensor);
  if (!ab.extra.empty() && static_cast<std::int64_t>(ab.extra.size()) != shape_numel(e.shape))
    return Error{fmt::format("the {} term of {} has {} elements, the tensor {}", ab.algorithm, it.tensor,
                             ab.extra.size(), shape_numel(e.shape))};
  return ab;
}

}  // namespace validate::compare::detail
