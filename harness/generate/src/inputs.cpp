#include "validate/generate/inputs.hpp"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "validate/core/rng.hpp"
#include "validate/ops/registry.hpp"
#include "validate/train/trajectory.hpp"

namespace validate::generate {

namespace {

struct Draw {
  std::string name;
  Shape shape;
  float scale;        // random fill: N(0,1) * scale
  int exact_max_abs;  // exact fill: integers in [-m, m]
  double density;     // exact fill: probability of a non-zero
};

Tensor draw(const cases::Case& c, cases::Op op, const Draw& d, std::uint64_t seed, Fill fill, unsigned threads,
            std::int64_t step) {
  const Philox rng = train::step_stream(Philox(seed, c.name, cases::op_name(op), d.name), step);
  Tensor f32 = Tensor::uninitialized(DType::float32, d.shape);  // part() below writes every element
  float* p = f32.data<float>();
  const auto n = static_cast<std::uint64_t>(f32.numel());
  const double span = 2.0 * d.exact_max_abs + 1.0;
  // Element i depends on i alone, so chunks can be drawn in parallel with identical bits; chunks
  // are whole batches of 16 Philox blocks (64 values) so each runs on the vector path throughout.
  auto part = [&](std::uint64_t b, std::uint64_t e) {
    if (fill == Fill::random) {
      rng.fill_normal(p + b, e - b, d.scale, b);
    } else {
      // One Philox block per element: word 0 decides zero/non-zero, word 1 the integer.
      for (std::uint64_t i = b; i < e; ++i) {
        auto blk = rng.block(i);
        double keep = static_cast<double>(blk[0] >> 8) / 16777216.0;
        double u = static_cast<double>(blk[1] >> 8) / 16777216.0;
        p[i] = keep < d.density ? static_cast<float>(std::floor(u * span) - d.exact_max_abs) : 0.0f;
      }
    }
    if (c.dtype == DType::bfloat16)
      round_to_bfloat16_inplace(p + b, e - b);
  };
  const std::uint64_t nt = n >= (1u << 18) ? std::max(1u, threads) : 1;
  const std::uint64_t chunk = (n / nt + 63) / 64 * 64;
  std::vector<std::thread> pool;
  for (std::uint64_t t = 1; t < nt; ++t) {
    const std::uint64_t b = std::min(n, t * chunk), e = t + 1 == nt ? n : std::min(n, b + chunk);
    if (b < e) pool.emplace_back(part, b, e);
  }
  part(0, std::min(n, nt == 1 ? n : chunk));
  for (auto& th : pool) th.join();
  if (c.dtype == DType::float16) return f32.to(DType::float16);
  return f32;
}

}  // namespace

std::map<std::string, Tensor> make_inputs(const cases::Case& c, cases::Op op, std::uint64_t seed, Fill fill,
                                          int threads, std::int64_t step) {
  const unsigned nt = threads > 0 ? static_cast<unsigned>(threads) : std::max(1u, std::thread::hardware_concurrency());
  std::vector<Draw> draws;
  const double k = static_cast<double>(ops::find(op).reduction_length(c.find(op)->params));
  const float wscale = static_cast<float>(1.0 / std::sqrt(k));
  // Exact fill: |x| <= 2, |w| <= 2, so a product is <= 4 and K products stay below 2^24 at this density.
  const double density = std::min(1.0, 16777216.0 / (2.0 * 2.0 * k));
  for (const auto& t : c.inputs(op)) {
    if (step > 0 && t.parameter) continue;  // a later step's parameters are the optimizer's
    Draw d{t.name, t.shape, 1.0f, 2, 1.0};
    if (t.name == "weight" || t.name == "B") {
      d.scale = wscale;
      d.density = density;
    } else if (t.name == "bias") {
      d.scale = 0.1f;
    } else if (t.name == "target") {
      d.exact_max_abs = 4;
    }
    draws.push_back(d);
  }
  std::map<std::string, Tensor> out;
  for (const auto& d : draws) out.emplace(d.name, draw(c, op, d, seed, fill, nt, step));
  return out;
}

}  // namespace validate::generate
