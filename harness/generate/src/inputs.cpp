#include "validate/generate/inputs.hpp"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "validate/core/rng.hpp"
#include "validate/ops/registry.hpp"
#include "validate/train/trajectory.hpp"

namespace validate::generate {

namespace {

using cases::Dist;
using cases::InputDist;

struct Draw {
  std::string name;
  Shape shape;
  float scale;        // random fill: N(0,1) * scale (a distribution's own "scale" replaces it)
  int exact_max_abs;  // exact fill: integers in [-m, m]
  double density;     // exact fill: probability of a non-zero
  const InputDist* dist = nullptr;  // null: the normal fill
};

constexpr double kTwoPow32 = 4294967296.0;

// log_uniform: |x| = scale * 10^(-decades * u), u uniform in [0, 1) from 53 bits of block i, so
// |x| lies in (scale 10^-decades, scale] with log10|x| uniform; word 2's low bit is the sign.
float log_uniform(const Philox& rng, std::uint64_t i, double scale, double decades) {
  const auto b = rng.block(i);
  const double u = (static_cast<double>(b[0] >> 5) * 67108864.0 + static_cast<double>(b[1] >> 6)) / 9007199254740992.0;
  const double m = scale * std::pow(10.0, -decades * u);
  return static_cast<float>(b[2] & 1u ? -m : m);
}

// student_t: Bailey's polar method (Math. Comp. 62, 1994): U, V uniform in (-1, 1) until
// W = U^2 + V^2 < 1, then T = U sqrt(nu (W^(-2/nu) - 1) / W) is Student-t with nu degrees of
// freedom. Element i's attempts are blocks (a << 40) | i, two per block, so element i depends on
// i alone however many attempts its neighbours took (a tensor holds fewer than 2^40 elements).
float student_t(const Philox& rng, std::uint64_t i, double scale, double nu) {
  for (std::uint64_t a = 0;; ++a) {
    const auto b = rng.block((a << 40) | i);
    for (int k = 0; k < 4; k += 2) {
      const double u = (static_cast<double>(b[k]) + 0.5) / (kTwoPow32 / 2) - 1.0;
      const double v = (static_cast<double>(b[k + 1]) + 0.5) / (kTwoPow32 / 2) - 1.0;
      const double w = u * u + v * v;
      if (w < 1.0) return static_cast<float>(scale * u * std::sqrt(nu * (std::pow(w, -2.0 / nu) - 1.0) / w));
    }
  }
}

// One distribution's values for elements [b, e) (before rounding to the case dtype).
void draw_dist(const Philox& rng, const Draw& d, float* p, std::uint64_t b, std::uint64_t e) {
  const InputDist& s = *d.dist;
  const double scale = s.scale ? *s.scale : static_cast<double>(d.scale);
  switch (s.dist) {
    case Dist::normal:
    case Dist::sparse:
    case Dist::relu_normal:
      rng.fill_normal(p + b, e - b, static_cast<float>(scale), b);
      if (s.dist == Dist::relu_normal)
        for (std::uint64_t i = b; i < e; ++i) p[i] = p[i] > 0.0f ? p[i] : 0.0f;
      break;
    case Dist::log_uniform:
      for (std::uint64_t i = b; i < e; ++i) p[i] = log_uniform(rng, i, scale, s.decades);
      break;
    case Dist::student_t:
      for (std::uint64_t i = b; i < e; ++i) p[i] = student_t(rng, i, scale, s.dof);
      break;
    case Dist::npy:
      // Rounded once to float32 (nearest even) like every drawn value, then to the case dtype below.
      for (std::uint64_t i = b; i < e; ++i) p[i] = static_cast<float>(s.data->get(static_cast<std::int64_t>(i)));
      return;  // a file's values are used as they are
  }
  if (s.sign)
    for (std::uint64_t i = b; i < e; ++i) p[i] = s.sign > 0 ? std::fabs(p[i]) : -std::fabs(p[i]);
  if (s.zeros > 0) {
    // Element i is zero when word i of a stream of its own falls below zeros * 2^32: independent
    // of the values, and of i alone.
    const Philox z(fnv1a64("zeros", rng.key()));
    const double cut = s.zeros * kTwoPow32;
    for (std::uint64_t i = b; i < e; ++i)
      if (static_cast<double>(z.block(i / 4)[i % 4]) < cut) p[i] = 0.0f;
  }
}

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
    if (fill == Fill::random && d.dist) {
      draw_dist(rng, d, p, b, e);
      // A heavy tail or a wide log_uniform can pass float16's largest finite value: held at it.
      if (c.dtype == DType::float16)
        for (std::uint64_t i = b; i < e; ++i) p[i] = std::clamp(p[i], -65504.0f, 65504.0f);
    } else if (fill == Fill::random) {
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
    if (const cases::InputDist* s = c.input_dist(op, t.name); s && !s->is_default()) d.dist = s;
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

Status check_inputs(const std::vector<cases::Case>& list, Fill fill, const std::string& cases_path) {
  for (const auto& c : list) {
    for (const auto& [key, d] : c.input_dists) {
      const std::string at = cases_path + ": case '" + c.name + "' inputs." + key;
      if (fill == Fill::exact && !d.is_default())
        return Error{at + ": --fill exact draws small integers for every input, so it cannot draw \"" +
                     cases::describe(d) + "\"; leave out --fill exact, or the case's \"inputs\""};
      if (d.dist != cases::Dist::npy) continue;
      if (!d.data) return Error{at + ": " + d.file + " was not read (a case file is read with load_case_file)"};
      if (c.dtype != DType::float16) continue;
      for (std::int64_t i = 0; i < d.data->numel(); ++i)
        if (std::fabs(static_cast<float>(d.data->get(i))) > 65504.0f)
          return Error{fmt::format("{}: {} holds {} at flat index {}, beyond float16's largest finite value (65504), "
                                   "and the case is float16",
                                   at, d.file, d.data->get(i), i)};
    }
  }
  return Status::ok();
}

}  // namespace validate::generate
