// Time of validate::compare::diagnose on a failing conv2d output with K = 8192 * 3 * 3 = 73728
// (the default sweep's largest in_channels), for
//   A. a mistake nothing explains (every hypothesis is tried and rejected: the worst case), on
//      the full 1x32x32x32 output of that case;
//   B. the input read with H and W exchanged (the matching hypothesis is recomputed on every
//      sampled position), on an 8x8 spatial output with the same K (the per-position cost is K);
//   C. the same misread AND the output written column-major (NCHW:F): no single hypothesis fits,
//      the read + write pairs are searched and one is recomputed on every sampled position;
//   D. the output summed with a bfloat16 accumulator (the narrow-accumulation hypothesis and the
//      clean recompute it is held against, both on every sampled position).
// A also pays the pair search (every read hypothesis x every common write reading, no match).
// Next to it, compare's metric pass over the same pair (compute_metrics), the work every tensor
// costs whether it fails or not. Usage: bench_diagnosis [repeats=3]. Prints seconds (best of N).
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "validate/diagnosis/diagnosis.hpp"
#include "validate/metrics/metrics.hpp"

using namespace validate;
using namespace validate::compare;

namespace {

Tensor random_tensor(const Shape& s, unsigned seed, float scale) {
  Tensor t(DType::float32, s);
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.f, scale);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, d(gen));
  return t;
}

float bf16(double v) {  // round to 8 significant bits, ties to even
  if (v == 0) return 0;
  int e;
  std::frexp(v, &e);
  const double scale = std::ldexp(1.0, 8 - e);
  return static_cast<float>(std::nearbyint(static_cast<double>(static_cast<float>(v)) * scale) / scale);
}

// conv2d 3x3, padding 1, stride 1, no bias; swap: read the input as [N, C, W, H]; narrow: the
// running sum rounded to bfloat16 after every add (order c, kh, kw).
Tensor conv(const Tensor& x, const Tensor& w, bool swap, bool narrow = false) {
  const auto& xs = x.shape();
  const std::int64_t C = xs[1], H = xs[2], W = xs[3], O = w.shape()[0];
  Tensor y(DType::float32, {1, O, H, W});
  const float* xp = static_cast<const float*>(static_cast<const void*>(x.bytes()));
  const float* wp = static_cast<const float*>(static_cast<const void*>(w.bytes()));
  for (std::int64_t o = 0; o < O; ++o)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t ww = 0; ww < W; ++ww) {
        double s = 0;
        for (std::int64_t c = 0; c < C; ++c)
          for (int u = 0; u < 3; ++u)
            for (int v = 0; v < 3; ++v) {
              const std::int64_t ih = h - 1 + u, iw = ww - 1 + v;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              const std::int64_t xi = swap ? (c * W + iw) * H + ih : (c * H + ih) * W + iw;
              s += static_cast<double>(xp[xi]) * wp[((o * C + c) * 3 + u) * 3 + v];
              if (narrow) s = bf16(s);
            }
        y.set((o * H + h) * W + ww, s);
      }
  return y;
}

// Best wall time of n runs; g_cpu gets the best CPU time of the same runs (single-threaded code:
// on a loaded machine the CPU time is the figure that compares across runs).
double g_cpu = 0;
template <class F>
double best_of(int n, F&& f) {
  double best = 1e30;
  g_cpu = 1e30;
  for (int i = 0; i < n; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    f();
    g_cpu = std::min(g_cpu, static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

DiagnosisInput make_input(const Tensor& ref, const Tensor& run, const Tensor& x, const Tensor& w) {
  DiagnosisInput in;
  in.ref = view_of(ref);
  in.run = view_of(run);
  in.shape = in.run_shape = ref.shape();
  in.axes = "NCHW";
  in.op = validate::ops::Op::conv2d;
  in.tensor = "output";
  in.role = validate::ops::Role::output;
  in.rtol = 5e-4;
  in.floor = 1e-2;
  in.inputs = {{"input", view_of(x)}, {"weight", view_of(w)}};
  in.input_shapes = {{"input", x.shape()}, {"weight", w.shape()}};
  in.conv.padding[0] = in.conv.padding[1] = 1;
  return in;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 3;
  const std::int64_t C = 8192;
  const Tensor w = random_tensor({32, C, 3, 3}, 2, 1.f / 271.f);  // N(0,1)/sqrt(K)
  {
    const Tensor x = random_tensor({1, C, 32, 32}, 1, 1.f);
    const Tensor ref = random_tensor({1, 32, 32, 32}, 3, 1.f), run = random_tensor({1, 32, 32, 32}, 4, 1.f);
    Diagnosis dx;
    const double t = best_of(reps, [&] { dx = diagnose(make_input(ref, run, x, w)); });
    const double dx_cpu = g_cpu;
    MetricOptions mo;
    const double m = best_of(reps, [&] { (void)compute_metrics(view_of(ref), view_of(run), mo); });
    std::printf("A unexplained, output 1x32x32x32, K=73728: diagnose %.3f s, cpu %.3f s (%d hypotheses, named: %s); "
                "metric pass %.5f s\n",
                t, dx_cpu, dx.tried, dx.named() ? dx.named()->code.c_str() : "none", m);
  }
  {
    const Tensor x = random_tensor({1, C, 8, 8}, 5, 1.f);
    const Tensor ref = conv(x, w, false), run = conv(x, w, true);
    Diagnosis dx;
    const double t = best_of(reps, [&] { dx = diagnose(make_input(ref, run, x, w)); });
    const double dx_cpu = g_cpu;
    std::printf("B input H/W exchanged, output 1x32x8x8, K=73728: diagnose %.3f s, cpu %.3f s (%d hypotheses, "
                "named: %s on %lld positions)\n",
                t, dx_cpu, dx.tried, dx.named() ? dx.named()->code.c_str() : "none",
                dx.named() ? static_cast<long long>(dx.named()->checked) : 0LL);
  }
  {
    const Tensor x = random_tensor({1, C, 8, 8}, 5, 1.f);
    const Tensor ref = conv(x, w, false), bad = conv(x, w, true);
    Tensor run(DType::float32, ref.shape());  // bad's column-major bytes, read as C order
    const auto& s = ref.shape();
    for (std::int64_t o = 0; o < s[1]; ++o)
      for (std::int64_t h = 0; h < s[2]; ++h)
        for (std::int64_t ww = 0; ww < s[3]; ++ww)
          run.set((ww * s[2] + h) * s[1] + o, bad.get((o * s[2] + h) * s[3] + ww));
    Diagnosis dx;
    const double t = best_of(reps, [&] { dx = diagnose(make_input(ref, run, x, w)); });
    const double dx_cpu = g_cpu;
    std::printf("C input H/W exchanged + output written F order, output 1x32x8x8, K=73728: diagnose "
                "%.3f s, cpu %.3f s (%d hypotheses, named: %s)\n",
                t, dx_cpu, dx.tried, dx.named() ? dx.named()->code.c_str() : "none");
  }
  {
    const Tensor x = random_tensor({1, C, 8, 8}, 5, 1.f);
    const Tensor ref = conv(x, w, false), run = conv(x, w, false, true);
    Diagnosis dx;
    const double t = best_of(reps, [&] { dx = diagnose(make_input(ref, run, x, w)); });
    const double dx_cpu = g_cpu;
    std::printf("D bfloat16 accumulator, output 1x32x8x8, K=73728: diagnose %.3f s, cpu %.3f s (%d hypotheses, "
                "named: %s)\n",
                t, dx_cpu, dx.tried, dx.named() ? dx.named()->code.c_str() : "none");
  }
  return 0;
}
