#include "validate/cases/scale_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "validate/cases/scale_file.hpp"
#include "validate/core/mapped_file.hpp"
#include "validate/core/npy.hpp"
#include "validate/ops/registry.hpp"

namespace validate::cases {

namespace {

namespace stdfs = std::filesystem;

const double kU = std::ldexp(1.0, -24);  // float32's unit roundoff

double unit_roundoff(DType d) {
  return d == DType::bfloat16 ? std::ldexp(1.0, -8) : d == DType::float16 ? std::ldexp(1.0, -11) : kU;
}
double half_subnormal(DType d) {  // as generate's scale pass widens a subnormal dL/dy
  return d == DType::bfloat16 ? std::ldexp(1.0, -134) : d == DType::float16 ? std::ldexp(1.0, -25) : std::ldexp(1.0, -150);
}
double numel(const Shape& s) { return static_cast<double>(std::max<std::int64_t>(shape_numel(s), 1)); }

double value(const StoredValues& v, std::int64_t i) {
  switch (v.storage) {
    case DType::float16:
      return float16_bits_to_float(static_cast<const std::uint16_t*>(v.data)[i]);
    case DType::float64:
      return static_cast<const double*>(v.data)[i];
    default:
      return static_cast<const float*>(v.data)[i];
  }
}

// The products summed into an element of the gradient of leaf `leaf`: the other operand of each
// product (empty: the bias gradient's factor 1) and at most how many there are (the op's geometry:
// every product of one element pairs distinct elements of the operand and of dL/dy).
struct GradTerms {
  std::string partner;
  double n = 1;
};
std::optional<GradTerms> grad_terms(const std::string& op, const std::string& leaf, const std::map<std::string, Shape>& s) {
  const auto at = [&](const char* name, std::size_t axis) {
    const auto it = s.find(name);
    return it != s.end() && axis < it->second.size() ? static_cast<double>(it->second[axis]) : 0.0;
  };
  if (op == "matmul") {
    if (leaf == "A") return GradTerms{"B", at("B", 1)};  // grad_A = dY B^T: a row of N products
    if (leaf == "B") return GradTerms{"A", at("A", 0)};  // grad_B = A^T dY: a column of M
    return std::nullopt;
  }
  const double per_channel = numel(s.at("output")) / std::max(1.0, at("output", 1));  // N Ho Wo
  if (leaf == "bias") return GradTerms{"", per_channel};
  if (op == "conv2d") {
    // weight (O, C/g, kh, kw): an input element meets at most every output channel at each tap
    if (leaf == "input") return GradTerms{"weight", at("weight", 0) * at("weight", 2) * at("weight", 3)};
    if (leaf == "weight") return GradTerms{"input", per_channel};
  }
  if (op == "conv_transpose2d") {
    // weight (C, O/g, kh, kw): an input element feeds O/g channels at each tap
    if (leaf == "input") return GradTerms{"weight", at("weight", 1) * at("weight", 2) * at("weight", 3)};
    if (leaf == "weight") return GradTerms{"input", numel(s.at("input")) / std::max(1.0, at("input", 1))};
  }
  return std::nullopt;
}

std::string g(double v) { return fmt::format("{:.4g}", v); }

// A .npy file mapped, not copied (a scale, its tensor and the op's operands are read once each, in
// place: the largest im2col operand is 300 MB). C order only, as sets store every tensor.
struct MappedNpy {
  MappedFile file;
  npy::Header header;
  StoredValues values() const {
    return {file.data() + header.data_offset, header.dtype, shape_numel(header.shape)};
  }
};
// `any_order`: the caller reads only order-free figures (max |x|), so a Fortran-order file with the
// same values is as good (verify accepts one: its hash is of the values in C order).
Result<MappedNpy> map_npy(const std::string& path, bool any_order = false) {
  auto f = MappedFile::open(path);
  if (!f) return f.status();
  auto h = npy::parse_header(f->data(), f->size(), path);
  if (!h) return h.status();
  if (h->fortran_order && h->shape.size() > 1 && !any_order)
    return Error{path + ": Fortran order (a set stores C order)"};
  if (h->dtype != DType::float32 && h->dtype != DType::float16 && h->dtype != DType::float64)
    return Error{path + ": stored as " + std::string(dtype_name(h->dtype)) + ", not float32, float16 or float64"};
  f->advise_sequential();
  return MappedNpy{std::move(*f), std::move(*h)};
}

// Values [begin, begin + n) of `v` as float32 into `out` (float16 through the vectorized widening).
void load_block(const StoredValues& v, std::int64_t begin, int n, float* out) {
  if (v.storage == DType::float16) {
    float16_to_float(static_cast<const std::uint16_t*>(v.data) + begin, out, static_cast<std::size_t>(n));
  } else if (v.storage == DType::float32) {
    std::memcpy(out, static_cast<const float*>(v.data) + begin, static_cast<std::size_t>(n) * sizeof(float));
  } else {
    for (int j = 0; j < n; ++j) out[j] = static_cast<float>(value(v, begin + j));
  }
}

// f(slice, lo, hi) over [0, n) cut into contiguous slices, one per core, each on its own thread
// when n is large enough to be worth one (the scale checks read every reference tensor and scale
// of a compared set, and the op inputs of its ceilings: gigabytes on a sweep). Returns the count.
template <class F>
int for_slices(std::int64_t n, std::int64_t grain, F&& f) {
  const std::int64_t most = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::thread::hardware_concurrency()));
  const int k = static_cast<int>(std::max<std::int64_t>(1, std::min(most, n / std::max<std::int64_t>(grain, 1))));
  std::vector<std::thread> pool;
  for (int t = 1; t < k; ++t) pool.emplace_back([&, t] { f(t, n * t / k, n * (t + 1) / k); });
  f(0, 0, n / k);
  for (auto& th : pool) th.join();
  return k;
}
constexpr std::int64_t kSliceGrain = std::int64_t(1) << 21;  // elements per thread at least
// Elements ahead that the passes over mapped files prefetch: the hardware prefetcher stops at each
// 4 KiB page, so a pass that leaves it to the hardware waits on memory at the start of every page.
constexpr int kAhead = 2048;

// max |x| over the non-NaN values; none when one is infinite (as finite_max_abs of a Tensor).
std::optional<double> finite_max_abs(const StoredValues& v) {
  constexpr int kBlock = 4096;
  struct Part {
    float most = 0;
    bool inf = false;
  };
  std::vector<Part> parts(std::max<unsigned>(1, std::thread::hardware_concurrency()));
  const int k = for_slices(v.numel, kSliceGrain, [&](int slice, std::int64_t lo, std::int64_t hi) {
    Part p;
    if (v.storage == DType::float32) {
      // In place, four lanes at a time (max is exact in any order; NaN compares false).
      typedef float v4f __attribute__((vector_size(16)));
      typedef std::int32_t v4i __attribute__((vector_size(16)));
      const float* f = static_cast<const float*>(v.data);
      const v4i abs_mask = v4i{} + 0x7fffffff;
      v4f most = v4f{}, inf_lanes = v4f{};
      const v4f inf = v4f{} + INFINITY;
      std::int64_t i = lo;
      for (; i + 4 <= hi; i += 4) {
        if (((i - lo) & 15) == 0) __builtin_prefetch(f + i + kAhead, 0, 3);
        v4f x;
        std::memcpy(&x, f + i, sizeof x);
        const v4f a = (v4f)((v4i)x & abs_mask);
        most = a > most ? a : most;
        inf_lanes = a == inf ? inf : inf_lanes;
      }
      for (int l = 0; l < 4; ++l) {
        p.most = most[l] > p.most ? most[l] : p.most;
        p.inf |= inf_lanes[l] == INFINITY;
      }
      for (; i < hi; ++i) {
        const float a = std::fabs(f[i]);
        p.inf |= a == INFINITY;
        p.most = a > p.most ? a : p.most;
      }
    } else {
      std::vector<float> b(kBlock);
      for (std::int64_t i = lo; i < hi; i += kBlock) {
        const int n = static_cast<int>(std::min<std::int64_t>(kBlock, hi - i));
        load_block(v, i, n, b.data());
        for (int j = 0; j < n; ++j) {
          const float a = std::fabs(b[j]);
          p.inf |= a == INFINITY;
          p.most = a > p.most ? a : p.most;  // NaN compares false
        }
      }
    }
    parts[static_cast<std::size_t>(slice)] = p;
  });
  float most = 0;
  bool inf = false;
  for (int t = 0; t < k; ++t) most = std::max(most, parts[static_cast<std::size_t>(t)].most), inf |= parts[static_cast<std::size_t>(t)].inf;
  if (inf) return std::nullopt;
  return static_cast<double>(most);
}

}  // namespace

std::vector<std::string> scale_quantities(Role role) {
  if (role == Role::checkpoint) return {kCheckpointBoundQuantity};
  if (role == Role::grad) return {kGradientBoundQuantity, "rss_products"};
  return {"rss_products"};
}

Result<std::map<std::string, ScaleLimit>> scale_limits(const RefCase& rc, Op op) {
  std::map<std::string, ScaleLimit> out;
  const OpInstance* inst = rc.c.find(op);
  if (!inst) return out;
  const std::string on = op_name(op);
  std::map<std::string, Shape> shapes;
  std::map<std::string, double> most;  // finite max|x| of each input and of the output; absent: not finite
  std::vector<std::string> leaves;
  for (const auto& t : rc.c.tensors(op)) {
    shapes[t.name] = t.shape;
    if (t.role != Role::input && t.role != Role::output) continue;
    if (t.role == Role::input && t.name != "target") leaves.push_back(t.name);
    const std::string path = rc.dtype_dir + "/" + rc.c.file_name(op, t.name);
    auto tensor = map_npy(path, true);
    if (!tensor) return Error{path + ": " + tensor.message()};
    if (auto m = finite_max_abs(tensor->values())) most[t.name] = *m;
  }
  const double K = static_cast<double>(std::max<std::int64_t>(ops::find(op).reduction_length(inst->params), 1));
  // A checkpoint's scale is a trajectory bound, not a root-sum-square, and a training case's
  // scales are not checked against its reference tensors here: neither has the ceiling or the
  // floor below. Their values are still checked for sign and finiteness.
  for (const auto& t : rc.c.tensors(op))
    if (rc.c.has_bound_scale(t))
      out[t.name] = ScaleLimit{t.role == Role::output ? K + 1 : 1, std::nullopt, !rc.c.train && t.role != Role::checkpoint};
  const bool known = on == "matmul" || on == "conv2d" || on == "conv_transpose2d";
  const std::string a = on == "matmul" ? "A" : "input", b = on == "matmul" ? "B" : "weight";
  for (const auto& t : rc.c.tensors(op))
    if (t.role == Role::grad)
      if (auto gt = grad_terms(on, t.name.substr(5), shapes)) out[t.name].n = std::max(1.0, gt->n);
  if (!known || rc.c.train || !most.count(a) || !most.count(b) || !most.count("output") || !most.count("target"))
    return out;
  const DType d = rc.c.dtype;
  const double ud = unit_roundoff(d), r = kU / ud;
  const double bias = most.count("bias") ? most["bias"] : 0.0;
  if (shapes.count("bias") && !most.count("bias")) return out;
  // The output: K products (+ the bias, one more term).
  const double rho_y = std::sqrt(K * std::pow(most[a] * most[b], 2) + bias * bias);
  // A gradient (generate's scale pass): S^2 = sum (m^2 + n_max r^2 (dy + u_d m)^2) x^2 over its
  // products, dy = 2 |y - t| / N and m = dy widened by the output's rounding and the forward's
  // accumulation, in units of u_d.
  const double N = numel(shapes.at("output")), Y = most["output"], T = most["target"];
  const double dy = 2 * (Y + T) / N;
  const double m = dy + (2 / N) * ((d == DType::float32 ? 0.0 : 2.0) * Y + std::sqrt(K + 1) * r * (Y + rho_y)) +
                   half_subnormal(d) / ud;
  double n_max = K;
  for (const auto& l : leaves)
    n_max = std::max(n_max, std::ceil(l == "bias" ? N / numel(shapes.at(l)) : N * K / numel(shapes.at(l))));
  const double per_unit_x = std::sqrt(m * m + n_max * r * r * std::pow(dy + ud * m, 2));
  // Float32 rounding in generate's own pass (the squared op's sums, the roots) and the float16
  // storage's rounding up: a few parts in a thousand at most, and K u relatively.
  auto slack = [&](double n) { return 1 + std::ldexp(1.0, -7) + 2 * std::max(n, n_max) * kU; };
  for (auto& [name, lim] : out) {
    if (name == "output") {
      lim.ceiling = rho_y * slack(K + 1);
    } else if (auto gt = grad_terms(on, name.substr(5), shapes)) {
      const double x = gt->partner.empty() ? 1.0 : (most.count(gt->partner) ? most[gt->partner] : INFINITY);
      if (std::isfinite(x)) lim.ceiling = std::sqrt(lim.n) * x * per_unit_x * slack(lim.n);
    }
  }
  return out;
}

namespace {

// The limits one scale element is held to (check_scale_values): s = stored value times unit, y = |ref|.
struct ValueTest {
  double unit, ceiling, root_n, grow, tiny;
};

// float16_to_float of one element, inline so that the counting loops below vectorize with it.
inline float half_value(std::uint16_t bits) {
  const std::uint32_t h = bits, em = h & 0x7fffu, sign = (h & 0x8000u) << 16;
  const float sub = static_cast<float>(static_cast<std::int32_t>(em)) * 0x1p-24f;
  std::uint32_t sb;
  std::memcpy(&sb, &sub, 4);
  std::uint32_t b = em < 0x400u ? sb : (em << 13) + 0x38000000u;
  b = em >= 0x7c00u ? 0x7f800000u | ((em & 0x3ffu) << 13) : b;
  b |= sign;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// The element test of check_scale_values over a block, built for the widest vectors the CPU has
// and never contracted (a fused multiply-add would move the floor's rounding). NaN fails every
// comparison: !(s >= 0) catches it; an infinite |ref| has no floor.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define VALIDATE_SCALE_CLONES __attribute__((target_clones("avx512f", "avx2", "default"), optimize("fp-contract=off")))
#else
#define VALIDATE_SCALE_CLONES
#endif
typedef float vf8 __attribute__((vector_size(32)));
typedef std::int32_t vi8 __attribute__((vector_size(32)));
typedef std::uint32_t vu8 __attribute__((vector_size(32)));
// float16_to_float, eight lanes at a time (in one body: a helper would be compiled for the
// baseline, its vectors split into scalars before inlining).
VALIDATE_SCALE_CLONES void widen_half(const std::uint16_t* h, float* out, int n) {
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    if ((j & 31) == 0) __builtin_prefetch(h + j + kAhead, 0, 3);
    typedef std::uint16_t vh8 __attribute__((vector_size(16)));
    vh8 raw;
    std::memcpy(&raw, h + j, sizeof raw);
    const vu8 bits = __builtin_convertvector(raw, vu8);
    const vu8 em = bits & 0x7fffu, sign = (bits & 0x8000u) << 16;
    const vf8 sub = __builtin_convertvector((vi8)em, vf8) * 0x1p-24f;
    vu8 b = em < 0x400u ? (vu8)sub : (em << 13) + 0x38000000u;
    b = em >= 0x7c00u ? (0x7f800000u | ((em & 0x3ffu) << 13)) : b;
    b |= sign;
    std::memcpy(out + j, &b, sizeof b);
  }
  for (; j < n; ++j) out[j] = half_value(h[j]);
}
// How many of n elements break something: sixteen at a time, each group's loop vectorized by the
// compiler (written out here: a helper without this function's options is not inlined into it),
// the last group padded with elements that fit (0 against 0).
VALIDATE_SCALE_CLONES std::int64_t count_unfit(const float* f, const float* r, int n, const ValueTest& v) {
  float f_tail[16] = {}, r_tail[16] = {};
  std::int64_t bad = 0;
  for (int j = 0; j < n; j += 16) {
    const float *fp = f + j, *rp = r + j;
    if (n - j < 16) {
      std::memcpy(f_tail, fp, static_cast<std::size_t>(n - j) * sizeof(float));
      std::memcpy(r_tail, rp, static_cast<std::size_t>(n - j) * sizeof(float));
      fp = f_tail, rp = r_tail;
    }
    __builtin_prefetch(f + j + kAhead, 0, 3);
    __builtin_prefetch(r + j + kAhead, 0, 3);
    for (int l = 0; l < 16; ++l) {
      const double s = fp[l] * v.unit, y = std::fabs(static_cast<double>(rp[l]));
      const bool fits = (s >= 0) & (s <= v.ceiling) & (s < INFINITY) &
                        !((y > v.root_n * s * v.grow + v.tiny) & (y < INFINITY));
      bad += fits ? 0 : 1;
    }
  }
  return bad;
}

}  // namespace

std::string check_scale_values(const StoredValues& scale, double unit, const StoredValues& ref, const ScaleLimit& limit) {
  const bool floor = limit.floor && ref.data && ref.numel == scale.numel;
  const double root_n = std::sqrt(limit.n);
  // |ref| <= sqrt(n) rho, up to the reference's own rounding (its dtype, dL/dy's, the float32 sum)
  // and an underflow allowance of n float32 half-spacings plus float16's smallest subnormal.
  const double grow = 1 + std::ldexp(1.0, -5) + 2 * limit.n * kU;
  const double tiny = limit.n * std::ldexp(1.0, -149) + std::ldexp(1.0, -24);
  const double ceiling = limit.ceiling ? *limit.ceiling : INFINITY;
  // What one element breaks, if anything ("" when nothing): the slow path, run only on a block
  // the branch-free test below found a bad element in.
  auto why = [&](std::int64_t i, double s, double r) -> std::string {
    if (std::isnan(s)) return fmt::format("element {} is NaN: a scale is finite", i);
    if (std::isinf(s)) return fmt::format("element {} is {}: a scale is finite", i, s > 0 ? "+inf" : "-inf");
    if (s < 0) return fmt::format("element {} is {}: a scale is a root-sum-square, never negative", i, g(s));
    if (s > ceiling)
      return fmt::format("element {} is {}, above {}, the largest this tensor's scale can be (sqrt(n) max|a| max|b| "
                         "from the set's own inputs, n = {}): a raised scale widens every bound made from it",
                         i, g(s), g(ceiling), g(limit.n));
    const double y = std::fabs(r);
    if (floor && std::isfinite(y) && y > root_n * s * grow + tiny)
      return fmt::format("element {} is {} where the reference is {}: below |ref| / sqrt(n) = {} (n = {}), the least "
                         "a sum of n products of that size has{}",
                         i, g(s), g(r), g(y / root_n), g(limit.n), s == 0 ? " (a zero scale)" : "");
    return "";
  };
  constexpr int kBlock = 4096;
  const ValueTest test{unit, ceiling, root_n, grow, tiny};
  // Blocks [lo, hi) in order: the first element that breaks something, "" when none does. Slices of
  // blocks run in parallel; the first slice (in element order) with a finding has the first element.
  // Float32 and float16 are read in place; anything else through float32 copies.
  auto scan = [&](std::int64_t lo, std::int64_t hi) -> std::string {
    std::vector<float> sb(kBlock), rb(kBlock, 0.0f);
    for (std::int64_t b = lo * kBlock; b < std::min(hi * kBlock, scale.numel); b += kBlock) {
      const int n = static_cast<int>(std::min<std::int64_t>(kBlock, scale.numel - b));
      const float* rp = rb.data();  // zeros without a floor: |ref| 0 is under every floor
      if (floor && ref.storage == DType::float32) rp = static_cast<const float*>(ref.data) + b;
      else if (floor) load_block(ref, b, n, rb.data());
      const float* sp = sb.data();
      if (scale.storage == DType::float16) widen_half(static_cast<const std::uint16_t*>(scale.data) + b, sb.data(), n);
      else if (scale.storage == DType::float32) sp = static_cast<const float*>(scale.data) + b;
      else load_block(scale, b, n, sb.data());
      const std::int64_t bad_count = count_unfit(sp, rp, n, test);
      if (bad_count == 0) continue;
      for (int j = 0; j < n; ++j)
        if (std::string w = why(b + j, sp[j] * unit, rp[j]); !w.empty()) return w;
    }
    return "";
  };
  const std::int64_t blocks = (scale.numel + kBlock - 1) / kBlock;
  std::vector<std::string> found(std::max<unsigned>(1, std::thread::hardware_concurrency()));
  const int k = for_slices(blocks, kSliceGrain / kBlock,
                           [&](int slice, std::int64_t lo, std::int64_t hi) { found[static_cast<std::size_t>(slice)] = scan(lo, hi); });
  for (int t = 0; t < k; ++t)
    if (!found[static_cast<std::size_t>(t)].empty()) return found[static_cast<std::size_t>(t)];
  return "";
}

std::vector<std::string> check_scale_format(const std::vector<RefCase>& cases) {
  // Per kind of scale (results, checkpoints): who has one and who lacks one; per gradient: the
  // quantity. (Storage may mix: a float32 scale read at face value loosens nothing.)
  std::map<std::string, std::vector<std::string>> with, without;
  std::map<std::string, std::string> first_of;  // what -> the first scale's value, a tab, its name
  std::vector<std::string> out;
  auto same = [&](const std::string& key, const std::string& v, const std::string& who) {
    auto [it, fresh] = first_of.emplace(key, v + "\t" + who);
    if (fresh) return;
    const std::string have = it->second.substr(0, it->second.find('\t'));
    if (have != v)
      out.push_back(fmt::format("{}: {} {}, but {} has {}: a set is of one format as a whole (regenerate it)", who, key,
                                v, it->second.substr(it->second.find('\t') + 1), have));
  };
  for (const RefCase& rc : cases)
    for (const OpInstance& inst : rc.c.ops) {
      const Op op = inst.op();
      for (const auto& t : rc.c.tensors(op)) {
        if (!rc.c.has_bound_scale(t)) continue;
        const std::string kind = t.role == Role::checkpoint ? "checkpoint" : "output and gradient";
        const std::string who = fmt::format("{}/{}_metadata.json (ops.{}.scales.{})", rc.dtype_dir, rc.c.name,
                                            op_name(op), t.name);
        const Json* e = find_path(rc.metadata, {"ops", op_name(op), "scales", t.name.c_str()});
        if (!e || !e->is_object()) {
          without[kind].push_back(who);
          continue;
        }
        with[kind].push_back(who);
        if (t.role == Role::grad && e->contains("quantity") && (*e)["quantity"].is_string())
          same("gradient scale quantity", "\"" + (*e)["quantity"].get<std::string>() + "\"", who);
      }
    }
  for (const auto& [kind, missing] : without)
    if (with.count(kind))
      out.push_back(fmt::format("{} lists no error-bound scale while {} and {} other {} scale(s) of the set do: a set "
                                "made since scales exist has one for every {}, and an older one has none (a scale "
                                "removed leaves its tensor gated by the looser fixed tolerance); {} lack one",
                                missing.front(), with.at(kind).front(), with.at(kind).size() - 1, kind, kind,
                                missing.size()));
  return out;
}

std::string older_gradient_scale(const std::vector<RefCase>& cases) {
  for (const RefCase& rc : cases)
    for (const OpInstance& inst : rc.c.ops)
      for (const auto& t : rc.c.tensors(inst.op())) {
        if (t.role != Role::grad || !rc.c.has_bound_scale(t)) continue;
        const Json* q = find_path(rc.metadata, {"ops", op_name(inst.op()), "scales", t.name.c_str(), "quantity"});
        if (q && q->is_string() && q->get<std::string>() == "rss_products")
          return fmt::format("{}/{}_metadata.json (ops.{}.scales.{})", rc.dtype_dir, rc.c.name, op_name(inst.op()),
                             t.name);
      }
  return "";
}

std::vector<std::string> check_case_scales(const RefCase& rc) {
  std::vector<std::string> out;
  for (const OpInstance& inst : rc.c.ops) {
    const Op op = inst.op();
    auto limits = scale_limits(rc, op);
    if (!limits) {
      out.push_back(limits.message());
      continue;
    }
    for (const auto& t : rc.c.tensors(op)) {
      if (!rc.c.has_bound_scale(t)) continue;
      const Json* e = find_path(rc.metadata, {"ops", op_name(op), "scales", t.name.c_str()});
      if (!e || !e->is_object()) continue;  // check_scale_format's
      const std::string f = rc.dtype_dir + "/" + rc.c.file_name(op, t.name + "_scale");
      const std::string where = fmt::format("{}: error-bound scale of {} (ops.{}.scales.{})", f, t.name, op_name(op), t.name);
      const auto q = scale_quantities(t.role);
      const Json* sq = find_path(*e, {"quantity"});
      if (!sq || !sq->is_string() || std::find(q.begin(), q.end(), sq->get<std::string>()) == q.end()) {
        out.push_back(fmt::format("{}: quantity {} is not what a {} scale is (\"{}\")", where, sq ? sq->dump() : "missing",
                                  role_name(t.role), q.front()));
        continue;
      }
      auto s = map_npy(f);
      if (!s) {
        out.push_back(fmt::format("{}: {}", where, s.message()));
        continue;
      }
      if (s->header.shape != t.shape) {
        out.push_back(fmt::format("{}: shape {} but its tensor is {}", where, shape_to_string(s->header.shape),
                                  shape_to_string(t.shape)));
        continue;
      }
      auto unit = scale_unit(*e, s->header.dtype, where);
      if (!unit) {
        out.push_back(unit.message());
        continue;
      }
      auto ref = map_npy(rc.dtype_dir + "/" + rc.c.file_name(op, t.name));
      StoredValues rv;
      if (ref && ref->header.shape == t.shape) rv = ref->values();
      const std::string bad =
          check_scale_values(s->values(), *unit, rv, limits->count(t.name) ? limits->at(t.name) : ScaleLimit{});
      if (!bad.empty()) out.push_back(fmt::format("{}: {} (an invalid reference set)", where, bad));
    }
  }
  return out;
}

}  // namespace validate::cases
