#pragma once
// A small training generator for the trajectory tests: a conv2d (N=2 C=3 H=9 W=8, O=5
// KH=4 KW=2, no padding, bias: every axis of every tensor a different size, batch > 1) trained with
// torch.optim.SGD's update (train/sgd.hpp) on an MSE loss against the output of a hidden "true"
// filter, a new batch and target every step. The trajectory is computed three ways:
//  - exact:   in float64 (the reference; written as float32, as references are stored),
//  - float32: forward, backward and update in float32 (a clean stack: reordering/rounding noise),
//  - planted: float32 whose update is handed dW in another layout's bytes read as OIHW (`bytes_as`,
//             e.g. {0,2,3,1}: the OHWI = cuDNN KRSC bytes), while it REPORTS dW correctly.
// The reference set and run directory are then written with fixture.hpp, the trajectory tensors
// replaced by these values (the step-0 single-step tensors keep the fixture's own contents).
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../../compare/fixture.hpp"
#include "validate/train/schedule.hpp"
#include "validate/train/sgd.hpp"
#include "validate/train/tensor_names.hpp"

namespace validate::testing {

struct TrainSetup {
  std::uint64_t seed = 1;
  std::int64_t steps = 100, checkpoint_every = 25;
  double lr = 0.05, momentum = 0.9, weight_decay = 1e-4, dampening = 0;
  bool nesterov = false;
  double later_lr = 0;  // the learning rate of every update after the first (a schedule); 0: lr
};

inline constexpr std::int64_t kTN = 2, kTC = 3, kTH = 9, kTW = 8, kTO = 5, kTKH = 4, kTKW = 2;
inline constexpr std::int64_t kTHo = kTH - kTKH + 1, kTWo = kTW - kTKW + 1;  // 6, 7

inline cases::Case training_case(const TrainSetup& s, const std::string& name = "train_conv") {
  cases::Case c;
  c.name = name;
  c.dtype = DType::float32;
  cases::ConvParams p;
  p.n = kTN;
  p.c = kTC;
  p.h = kTH;
  p.w = kTW;
  p.o = kTO;
  p.kh = kTKH;
  p.kw = kTKW;
  p.padding = {0, 0};
  p.bias = true;
  c.ops = {cases::OpInstance{p}};
  train::TrainConfig t;
  t.steps = s.steps;
  t.lr = s.lr;
  t.momentum = s.momentum;
  t.weight_decay = s.weight_decay;
  t.dampening = s.dampening;
  t.nesterov = s.nesterov;
  t.checkpoint_every = s.checkpoint_every;
  c.train = t;
  return c;
}

// Trajectory tensors by name (train_loss, step<k>_weight, ...), as float64 values.
using TrajectoryValues = std::map<std::string, std::vector<double>>;

// The OIHW tensor `g` written in the axis order `to` (a permutation of OIHW) — the bytes a stack
// holding it in that layout has — then read back as OIHW.
template <class T>
std::vector<T> reinterpret_oihw(const std::vector<T>& g, const std::vector<int>& to) {
  Tensor t(DType::float64, {kTO, kTC, kTKH, kTKW});
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(g[static_cast<std::size_t>(i)]));
  const Tensor b = permuted_bytes(t, to);
  std::vector<T> out(g.size());
  for (std::int64_t i = 0; i < b.numel(); ++i) out[static_cast<std::size_t>(i)] = static_cast<T>(b.get(i));
  return out;
}

// How a training loop treats its gradient buffers between steps: zeroed (correct), never zeroed
// (each backward adds into them: the sums are written and applied, a missing zero_grad), or each
// step's own gradient written while the update applies the sum.
enum class GradBuffers { zeroed, accumulated, accumulated_update_only };

// T = double: the exact trajectory; T = float: a float32 stack; `bytes_as` non-empty: the planted
// mistake (the update reads dW in that layout's bytes) from step `planted_from` on; `buffers`: see
// GradBuffers.
template <class T>
TrajectoryValues simulate(const TrainSetup& s, const std::vector<int>& bytes_as = {},
                          GradBuffers buffers = GradBuffers::zeroed, std::int64_t planted_from = 0) {
  const cases::Case c = training_case(s);
  const auto keep = train::checkpoint_steps(*c.train);
  // float32-representable data, identical for every precision (references and runs read the same
  // float32 inputs).
  auto draw = [](std::mt19937_64& g, double sd) {
    std::normal_distribution<double> d(0.0, sd);
    return static_cast<double>(static_cast<float>(d(g)));
  };
  std::mt19937_64 init(s.seed * 7919 + 11);
  const std::size_t nw = kTO * kTC * kTKH * kTKW, nx = kTN * kTC * kTH * kTW, ny = kTN * kTO * kTHo * kTWo;
  std::vector<double> w_true(nw), b_true(kTO);
  for (auto& v : w_true) v = draw(init, 0.4);
  for (auto& v : b_true) v = draw(init, 0.2);
  std::vector<T> w(nw), b(kTO);
  for (auto& v : w) v = static_cast<T>(draw(init, 0.3));
  for (auto& v : b) v = static_cast<T>(draw(init, 0.1));
  train::SgdState<T> sw, sb;
  std::vector<T> sum_w, sum_b;  // the never-zeroed gradient buffers (GradBuffers)
  TrajectoryValues out;
  auto& loss_curve = out[train::kLossCurve];
  auto conv = [&](const std::vector<double>& x, const auto& wt, const auto& bt, std::int64_t n, std::int64_t o,
                  std::int64_t i, std::int64_t j, auto zero) {
    auto acc = zero + static_cast<decltype(zero)>(bt[static_cast<std::size_t>(o)]);
    for (std::int64_t ci = 0; ci < kTC; ++ci)
      for (std::int64_t kh = 0; kh < kTKH; ++kh)
        for (std::int64_t kw = 0; kw < kTKW; ++kw)
          acc += static_cast<decltype(zero)>(wt[static_cast<std::size_t>(((o * kTC + ci) * kTKH + kh) * kTKW + kw)]) *
                 static_cast<decltype(zero)>(x[static_cast<std::size_t>(((n * kTC + ci) * kTH + i + kh) * kTW + j + kw)]);
    return acc;
  };
  for (std::int64_t step = 0; step < s.steps; ++step) {
    std::mt19937_64 g(s.seed * 1000003 + static_cast<std::uint64_t>(step));
    std::vector<double> x(nx), t(ny);
    for (auto& v : x) v = draw(g, 1.0);
    for (std::int64_t n = 0; n < kTN; ++n)
      for (std::int64_t o = 0; o < kTO; ++o)
        for (std::int64_t i = 0; i < kTHo; ++i)
          for (std::int64_t j = 0; j < kTWo; ++j)
            t[static_cast<std::size_t>(((n * kTO + o) * kTHo + i) * kTWo + j)] =
                static_cast<double>(static_cast<float>(conv(x, w_true, b_true, n, o, i, j, 0.0) + draw(g, 0.05)));
    // Forward and loss (mean squared error), in T.
    std::vector<T> r(ny);
    T loss = 0;
    for (std::int64_t n = 0; n < kTN; ++n)
      for (std::int64_t o = 0; o < kTO; ++o)
        for (std::int64_t i = 0; i < kTHo; ++i)
          for (std::int64_t j = 0; j < kTWo; ++j) {
            const std::size_t at = static_cast<std::size_t>(((n * kTO + o) * kTHo + i) * kTWo + j);
            r[at] = conv(x, w, b, n, o, i, j, T(0)) - static_cast<T>(t[at]);
            loss += r[at] * r[at];
          }
    loss /= static_cast<T>(ny);
    // Backward: dW = 2/M sum r x, db = 2/M sum r.
    std::vector<T> gw(nw, T(0)), gb(kTO, T(0));
    const T scale = static_cast<T>(2.0 / static_cast<double>(ny));
    for (std::int64_t o = 0; o < kTO; ++o) {
      for (std::int64_t ci = 0; ci < kTC; ++ci)
        for (std::int64_t kh = 0; kh < kTKH; ++kh)
          for (std::int64_t kw = 0; kw < kTKW; ++kw) {
            T acc = 0;
            for (std::int64_t n = 0; n < kTN; ++n)
              for (std::int64_t i = 0; i < kTHo; ++i)
                for (std::int64_t j = 0; j < kTWo; ++j)
                  acc += r[static_cast<std::size_t>(((n * kTO + o) * kTHo + i) * kTWo + j)] *
                         static_cast<T>(x[static_cast<std::size_t>(((n * kTC + ci) * kTH + i + kh) * kTW + j + kw)]);
            gw[static_cast<std::size_t>(((o * kTC + ci) * kTKH + kh) * kTKW + kw)] = scale * acc;
          }
      T acc = 0;
      for (std::int64_t n = 0; n < kTN; ++n)
        for (std::int64_t i = 0; i < kTHo; ++i)
          for (std::int64_t j = 0; j < kTWo; ++j) acc += r[static_cast<std::size_t>(((n * kTO + o) * kTHo + i) * kTWo + j)];
      gb[static_cast<std::size_t>(o)] = scale * acc;
    }
    loss_curve.push_back(static_cast<double>(loss));
    std::vector<T> gw_step = gw, gb_step = gb;  // this step's own gradients
    if (buffers != GradBuffers::zeroed) {
      if (sum_w.empty()) sum_w.assign(nw, T(0)), sum_b.assign(kTO, T(0));
      for (std::size_t i = 0; i < nw; ++i) gw[i] = sum_w[i] = sum_w[i] + gw[i];
      for (std::size_t i = 0; i < gb.size(); ++i) gb[i] = sum_b[i] = sum_b[i] + gb[i];
    }
    const std::vector<T>& gw_out = buffers == GradBuffers::accumulated_update_only ? gw_step : gw;
    const std::vector<T>& gb_out = buffers == GradBuffers::accumulated_update_only ? gb_step : gb;
    if (std::find(keep.begin(), keep.end(), step) != keep.end()) {
      // What the stack reports: its parameters as this step's forward used them, its gradients
      // (correctly converted, even in the planted case).
      out[train::checkpoint_tensor(step, "weight")].assign(w.begin(), w.end());
      out[train::checkpoint_tensor(step, "bias")].assign(b.begin(), b.end());
      out[train::checkpoint_tensor(step, "grad_weight")].assign(gw_out.begin(), gw_out.end());
      out[train::checkpoint_tensor(step, "grad_bias")].assign(gb_out.begin(), gb_out.end());
    }
    const std::vector<T> applied = bytes_as.empty() || step < planted_from ? gw : reinterpret_oihw(gw, bytes_as);
    train::TrainConfig cfg = *c.train;
    if (s.later_lr > 0 && step >= 1) cfg.lr = s.later_lr;
    train::sgd_step(w.data(), applied.data(), w.size(), sw, cfg);
    train::sgd_step(b.data(), gb.data(), b.size(), sb, cfg);
  }
  return out;
}

// Writes the reference set (exact trajectory) and a run (`run_values`) for training_case(s);
// `alter` may change a run tensor after the trajectory values went in.
inline void write_training_sets(const std::string& ref, const std::string& run, const TrainSetup& s,
                                const TrajectoryValues& ref_values, const TrajectoryValues& run_values,
                                const TensorHook& alter = {}, const std::function<void(Json&)>& edit = {}) {
  const cases::Case c = training_case(s);
  auto fill = [](const TrajectoryValues& v, const std::string& key, Tensor& t) {
    const std::string tensor = key.substr(key.rfind('/') + 1);
    auto it = v.find(tensor);
    if (it == v.end()) return;
    for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, it->second[static_cast<std::size_t>(i)]);
  };
  write_reference(ref, {c}, [&](const std::string& key, Tensor& t) { fill(ref_values, key, t); });
  RunSpec spec;
  spec.mutate = [&](const std::string& key, Tensor& t) {
    fill(run_values, key, t);
    if (alter) alter(key, t);
  };
  if (edit) spec.edit = edit;
  write_run(ref, run, spec);
}

}  // namespace validate::testing
