// The generator's LibTorch driver (with each op's <op>_torch.cpp, the only LibTorch translation units:
// their headers cost ~20 s each): leaves, the op's forward, MSE loss, backward, results; and a
// training case's trajectory with LibTorch's own SGD.
#include "validate/generate/torch_reference.hpp"

#include <torch/torch.h>
#include <torch/version.h>

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>

#include "validate/cases/refset.hpp"
#include "validate/core/blas_info.hpp"
#include "validate/core/cuda_unusable.hpp"
#include "validate/generate/huge_page_allocator.hpp"
#include "validate/metrics/bounds.hpp"
#include "validate/ops/registry.hpp"
#include "validate/ops/torch_forward.hpp"
#include "validate/train/tensor_names.hpp"

namespace validate::generate {

namespace {

at::ScalarType compute_type(DType logical) {
  switch (logical) {
    case DType::bfloat16: return at::kBFloat16;
    case DType::float16: return at::kHalf;
    case DType::float64: return at::kDouble;
    default: return at::kFloat;
  }
}

at::Tensor to_torch(const Tensor& t, at::ScalarType type, const at::Device& dev) {
  at::ScalarType st = t.dtype() == DType::float16 ? at::kHalf : t.dtype() == DType::float64 ? at::kDouble : at::kFloat;
  std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  // from_blob does not own: the caller's tensors outlive the computation (torch_compute returns
  // copies of every result), and nothing here writes into a leaf, so no clone is needed; that saves
  // a copy of every input and, on the largest case, 300 MB of peak memory. Our buffers are 64-byte
  // aligned like LibTorch's own, so the kernels take the same paths (references are unchanged).
  at::Tensor x = torch::from_blob(const_cast<std::byte*>(t.bytes()), shape, torch::TensorOptions().dtype(st));
  return x.to(dev).to(type);
}

Tensor from_torch(const at::Tensor& x, DType storage) {
  at::ScalarType st = storage == DType::float16 ? at::kHalf : storage == DType::float64 ? at::kDouble : at::kFloat;
  at::Tensor c = x.detach().to(at::kCPU).to(st).contiguous();
  Shape shape(c.sizes().begin(), c.sizes().end());
  Tensor t = Tensor::uninitialized(storage, shape);  // filled by the memcpy below
  if (t.nbytes()) std::memcpy(t.bytes(), c.data_ptr(), t.nbytes());
  return t;
}

// A result LibTorch will not touch again, without a copy (the copy of the largest
// gradient was one more 300 MB buffer at generate's peak). The conversion to the storage dtype is
// the only copy left, and only when the types differ; the Tensor keeps LibTorch's buffer alive.
// A buffer off the 64-byte alignment our Tensors promise (LibTorch's CPU allocator gives 64) is
// copied instead. Not for tensors LibTorch updates later (the trajectory's parameters).
Tensor adopt_from_torch(const at::Tensor& x, DType storage) {
  const at::ScalarType st = storage == DType::float16 ? at::kHalf : storage == DType::float64 ? at::kDouble : at::kFloat;
  at::Tensor c = x.detach().to(at::kCPU).to(st).contiguous();
  if (c.numel() > 0 && reinterpret_cast<std::uintptr_t>(c.data_ptr()) % 64 == 0) {
    Shape shape(c.sizes().begin(), c.sizes().end());
    auto* data = static_cast<std::byte*>(c.data_ptr());
    return Tensor::adopt(storage, std::move(shape), data, std::make_shared<at::Tensor>(std::move(c)));
  }
  return from_torch(c, storage);
}

std::string run_command(const char* cmd) {
  std::string out;
  FILE* p = ::popen(cmd, "r");
  if (!p) return out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  ::pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// How a case's dtype is computed on a device; torch_compute and torch_trajectory follow it alike,
// so a trajectory's step 0 is the single step exactly. On the CPU, LibTorch's reduced-precision
// kernels are not the reference a GPU stack should be held to: 1.13 has no float16 convolution or
// matmul at all, and its bfloat16 GEMM accumulates in bfloat16 on some shapes (6 bfloat16 ULP off
// the exact result on the smoke set's grouped case, where cuBLAS and cuDNN accumulate in float32).
// So a bfloat16/float16 case on the CPU is computed in float32 from its (exactly representable)
// inputs and rounded to the case dtype where a native run rounds: the output before the loss,
// dL/dy before the backward pass, and every gradient once at the end. On CUDA the native kernels
// run.
struct DtypePlan {
  DType storage;
  at::ScalarType logical;
  bool emulate;
  at::ScalarType compute;  // the type tensors enter the op in
  DtypePlan(DType dtype, const at::Device& dev)
      : storage(storage_dtype(dtype)),
        logical(compute_type(dtype)),
        emulate(logical != at::kFloat && logical != at::kDouble && dev.is_cpu()),
        compute(emulate ? at::kFloat : logical) {}
  // `t` as the case dtype holds it, in the compute type, differentiably: autograd casts the incoming
  // gradient the same way (so a float32 master parameter receives the case dtype's gradient).
  at::Tensor narrow(const at::Tensor& t) const { return emulate ? t.to(logical).to(at::kFloat) : t.to(logical); }
};

// The path of the CUDA runtime this process has loaded (a CUDA LibTorch loads libcudart through
// libtorch_cuda), or "" when there is none.
std::string loaded_cudart() {
  std::string path;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const char* name = info->dlpi_name;
        if (name && std::strstr(name, "/libcudart.so")) {
          *static_cast<std::string*>(data) = name;
          return 1;
        }
        return 0;
      },
      &path);
  return path;
}

// Why LibTorch sees no CUDA device. torch::cuda::is_available() only says false (with no driver
// LibTorch does not even warn), so the reason comes from the CUDA runtime LibTorch itself loaded,
// asked through dlsym: this translation unit needs no CUDA header and builds against a CPU LibTorch.
// (at::hasCUDA() cannot tell "no CUDA in this LibTorch" from "no device": in 2.x it is false in both
// cases; a CUDA LibTorch always has the CUDA runtime loaded, through libtorch_cuda.so.)
std::string torch_cuda_unusable_reason() {
  const std::string cudart = loaded_cudart();
  if (cudart.empty()) return std::string("this LibTorch (") + TORCH_VERSION + ") was built without CUDA";
  void* h = cudart.empty() ? nullptr : dlopen(cudart.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  using IntFn = int (*)(int*);
  using NameFn = const char* (*)(int);
  auto count_fn = h ? reinterpret_cast<IntFn>(dlsym(h, "cudaGetDeviceCount")) : nullptr;
  auto driver_fn = h ? reinterpret_cast<IntFn>(dlsym(h, "cudaDriverGetVersion")) : nullptr;
  auto runtime_fn = h ? reinterpret_cast<IntFn>(dlsym(h, "cudaRuntimeGetVersion")) : nullptr;
  auto name_fn = h ? reinterpret_cast<NameFn>(dlsym(h, "cudaGetErrorName")) : nullptr;
  auto text_fn = h ? reinterpret_cast<NameFn>(dlsym(h, "cudaGetErrorString")) : nullptr;
  std::string why;
  if (count_fn && driver_fn && runtime_fn && name_fn && text_fn) {
    int count = 0, driver = 0, runtime = 0;
    const int e = count_fn(&count);
    driver_fn(&driver);
    runtime_fn(&runtime);
    why = core::cuda_unusable_reason(e, name_fn(e), text_fn(e), driver, runtime, count);
  }
  if (h) dlclose(h);
  if (why.empty()) why = "LibTorch's CUDA initialization found no device (torch::cuda::is_available() is false)";
  return why;
}

// The reduction length of leaf `name`'s gradient as compare counts it (compare_bound.cpp,
// reduction_length): numel(output) K / numel(leaf), the bias numel(output) / numel(bias).
double gradient_reduction_length(const std::string& name, std::int64_t leaf_numel, double n_out, double k_op) {
  const double mine = static_cast<double>(std::max<std::int64_t>(leaf_numel, 1));
  return std::max(1.0, std::ceil(name == "bias" ? n_out / mine : n_out * k_op / mine));
}

// The grid of a bfloat16/float16 dtype around values `g` on it (float32 tensors): the spacing
// above |g| (away from zero) and below it (toward zero; half as wide at a power of two).
struct GridSpacing {
  at::Tensor above, below;
};
GridSpacing grid_spacing(const at::Tensor& g, DType d) {
  const int p = d == DType::bfloat16 ? 8 : 11, emin = d == DType::bfloat16 ? -126 : -14;
  const at::Tensor a = g.abs();
  auto [m, e] = at::frexp(a);  // a = m 2^e, m in [0.5, 1)
  const at::Tensor il = at::where(a > 0, e - 1, at::full_like(e, emin)).clamp_min(emin);
  at::Tensor above = at::exp2((il - (p - 1)).to(at::kFloat));
  at::Tensor below = at::where((m == 0.5) & (il > emin), above * 0.5, above);
  return {above, below};
}

// How far v (float32) lies inside the interval that rounds to g (its value in the dtype): the
// distance to the nearer rounding boundary, negative outside it.
at::Tensor inside_distance(const at::Tensor& v, const at::Tensor& g, DType d) {
  const GridSpacing s = grid_spacing(g, d);
  const at::Tensor a = g.abs(), side = at::where(g < 0, -v, v);  // v measured on g's side of zero
  const at::Tensor off_zero = at::minimum(side - (a - s.below * 0.5), a + s.above * 0.5 - side);
  return at::where(g == 0, s.above * 0.5 - v.abs(), off_zero);
}

at::Tensor round_to(const at::Tensor& t, DType d) { return t.to(compute_type(d)).to(at::kFloat); }

// The dL/dy choice of a bfloat16/float16 op (docs/compare.md, "dL/dy's rounding, stored"). Two
// correct stacks take their dL/dy = 2 (y - t) / N from the same stored output, and then either keep
// it in float32 or round it to the case dtype (LibTorch, the reference, rounds). That is a choice,
// not noise: the gradient moves by Dg = backward(op, D) with D = round(dy) - dy, computed here
// exactly for this data; so are the two routes of a bias added after the stored sum (conv2d,
// conv_transpose2d). What is left between the two stacks is rare and random: a stored value that
// rounds the other way (its float32 value within both stacks' accumulation bound of a rounding
// boundary), a dL/dy within float32 noise of one, the float32 evaluation of dL/dy, and the float32
// accumulation of both gradients. Their bound F_j on |dy_run - dy_ref| per element enters
// root-sum-square through the squared operands (choice_statistical), and
//   Z = max |Dg| + lambda0 sqrt(sum_j (F_j^2 + 2 n u^2 a_j^2) x_j^2),  a_j = |dy_j| + F_j + max |D_j|,
// lambda0 = 8, is stored per gradient element; compare adds the gradient's own accumulation and
// storage roundings of both sides (bounds.hpp, BoundOptions::choice).
struct ChoiceTerms {
  at::Tensor y32, stored, dy, D;  // the float32 forward, the stored output, dL/dy, D
  // A bias added after the stored sum (conv2d, conv_transpose2d): the float32 sum s = y - bias,
  // the output that route stores, round(round(s) + bias), and its dL/dy (undefined: no bias).
  at::Tensor sum, after, dy_after;
  std::map<std::string, at::Tensor> dg, spread;  // per gradient leaf: |Dg|, then Z
};
constexpr double kChoiceLambda = 8;

// The float32 forward of the op's own (case-dtype) leaves, and Dg from it. `sum`: that forward
// already made from `leaves` with its graph kept (a case computed in float32); otherwise it is
// made here from float32 copies (a native bfloat16/float16 run on CUDA).
ChoiceTerms choice_deterministic(const ops::OpParams& params, const ops::TorchLeaves& leaves, const at::Tensor& y,
                                 const at::Tensor& target, DType d, const at::Tensor* sum) {
  ChoiceTerms c;
  ops::TorchLeaves lin;
  if (sum) {
    lin = leaves;
  } else {
    for (const auto& [name, t] : leaves) lin.emplace(name, t.detach().to(at::kFloat).requires_grad_(true));
  }
  at::Tensor z = sum ? *sum : ops::torch_forward(params, lin);
  c.y32 = z.detach();
  c.stored = y.detach().to(at::kFloat);
  const double two_n = 2.0 / static_cast<double>(c.stored.numel());
  c.dy = (c.stored - target) * two_n;
  const at::Tensor rounded = round_to(c.dy, d);  // the reference's dL/dy
  c.D = rounded - c.dy;
  // The moves from the reference's gradient, one per other legal route: dL/dy kept; with a bias
  // added after the stored sum, dL/dy of that output rounded, and kept.
  std::vector<at::Tensor> moves{c.D};
  if (auto b = lin.find("bias"); b != lin.end() && c.y32.dim() == 4) {
    const at::Tensor b4 = b->second.detach().to(at::kFloat).view({1, -1, 1, 1});  // output channels: axis 1
    c.sum = c.y32 - b4;
    c.after = round_to(round_to(c.sum, d) + b4, d);
    c.dy_after = (c.after - target) * two_n;
    moves.push_back(round_to(c.dy_after, d) - rounded);
    moves.push_back(c.dy_after - rounded);
  }
  std::vector<at::Tensor> inputs;
  std::vector<std::string> names;
  for (const auto& [name, t] : lin) inputs.push_back(t), names.push_back(name);
  for (std::size_t m = 0; m < moves.size(); ++m) {  // not accumulated into the leaves' .grad
    auto g = torch::autograd::grad({z}, inputs, {moves[m]}, /*retain_graph=*/m + 1 < moves.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (m == 0) c.dg.emplace(names[i], g[i].abs_());
      else c.dg.at(names[i]) = at::maximum(c.dg.at(names[i]), g[i].abs_());
    }
  }
  c.D = c.D.abs();
  for (std::size_t m = 1; m < moves.size(); ++m) c.D = at::maximum(c.D, moves[m].abs());
  return c;
}

// F_j and the root term of Z through the squared operands `sq` (their forward y2, the output's
// scale rho_y), at reduction length k of the output and n_max of the gradients.
void choice_statistical(ChoiceTerms& c, const ops::TorchLeaves& sq, const at::Tensor& y2, const at::Tensor& rho_y,
                        DType d, double k, double n_max) {
  const double u = std::ldexp(1.0, -24);
  const double two_n = 2.0 / static_cast<double>(c.stored.numel());
  // Both stacks' float32 sums lie within kChoiceLambda times the direct sum's bound of exact.
  auto window = [&](const at::Tensor& v) {
    return 2 * kChoiceLambda * u * (std::sqrt(k) * (v.abs() + rho_y) + rho_y) + 2 * k * std::ldexp(1.0, -150);
  };
  // One route: `v` the float32 value the stack rounds to the stored output `out` (dL/dy from
  // it: dy). Where v may round the other way dL/dy moves by `step` (2/N the output's ULPs) and
  // its own rounding by one ULP; a dL/dy within float32 noise of a boundary moves one ULP; its
  // float32 evaluation 2 u |dy| everywhere.
  auto route = [&](const at::Tensor& v_flips, const at::Tensor& step, const at::Tensor& dy) {
    const at::Tensor rounded = round_to(dy, d);
    const at::Tensor dy_flips = inside_distance(dy, rounded, d) <= 4 * u * dy.abs() + std::ldexp(1.0, -149);
    const at::Tensor ulp_dy = grid_spacing(rounded.abs() + step, d).above;
    const at::Tensor zero = at::zeros_like(ulp_dy);
    return 2 * u * dy.abs() + at::where(v_flips, step + ulp_dy, zero) + at::where(dy_flips, ulp_dy, zero);
  };
  at::Tensor f = route(inside_distance(c.y32, c.stored, d) <= window(c.y32),
                       grid_spacing(c.stored, d).above * two_n, c.dy);
  at::Tensor spread = c.dy.abs();
  if (c.sum.defined()) {  // the bias added after the stored sum: round(s) may flip, then the output
    const at::Tensor s_rounded = round_to(c.sum, d);
    const at::Tensor step = (grid_spacing(s_rounded, d).above + grid_spacing(c.after, d).above) * two_n;
    f = at::maximum(f, route(inside_distance(c.sum, s_rounded, d) <= window(c.sum), step, c.dy_after));
    spread = at::maximum(spread, c.dy_after.abs());
  }
  const at::Tensor a = spread + f + c.D;  // c.D: the largest |move| of any route
  const at::Tensor up = f.square() + (2 * n_max * u * u) * a.square();
  std::vector<at::Tensor> inputs;
  std::vector<std::string> names;
  for (const auto& [name, t] : sq)
    if (t.requires_grad()) inputs.push_back(t), names.push_back(name);
  c.y32 = c.stored = c.dy = c.D = c.sum = c.after = c.dy_after = at::Tensor();
  auto g = torch::autograd::grad({y2}, inputs, {up}, /*retain_graph=*/true);
  for (std::size_t i = 0; i < names.size(); ++i) {  // in place: the largest gradient is 300 MB
    at::Tensor z = std::move(c.dg.at(names[i]));
    z.add_(g[i].clamp_min_(0).sqrt_(), kChoiceLambda);
    g[i] = at::Tensor();
    c.spread.emplace(names[i], std::move(z));
  }
  c.dg.clear();
}

// The error-bound scale pass (docs/compare.md, "Error bounds"). Every element of the output and of
// each gradient is a sum of products a_i b_i; its scale is sqrt(sum (a_i b_i)^2), which is the same
// bilinear op on squared operands: forward(x^2, w^2) (+ b^2: the bias is one more term), and each
// gradient the backward of that forward with the squared dL/dy magnitude m^2. m is |dL/dy| widened
// by what may move dL/dy = 2 (y - t) / N between two correct stacks, in units of the case dtype's
// unit roundoff u_d (compare multiplies the scale by u_d): the stored output's rounding (one ULP of
// the case dtype, <= 2 u_d |y|), the forward's float32 accumulation (sqrt(K + 1) u (|y| + rho_y),
// the bound's own model), and dL/dy's rounding to the case dtype where it is subnormal (an absolute
// half spacing). float32 throughout: a scale needs a few digits, and all its terms are positive.
// Returns the output's squared scale; `grads` receives the gradients' (with `only` non-empty, only
// those leaves'). The squared operands and the graph are gone when it returns: held until the
// square roots, the largest op's scales kept five copies of its operand at the peak.
at::Tensor scale_pass(const ops::OpParams& params, const ops::TorchLeaves& leaves, const at::Tensor& y,
                      const at::Tensor& target, DType d, cases::Op op, const std::vector<std::string>& only,
                      std::map<std::string, at::Tensor>& grads, ChoiceTerms* choice = nullptr,
                      const at::Tensor* partial_sums = nullptr) {
  const double u = std::ldexp(1.0, -24);
  const double ud = d == DType::bfloat16 ? std::ldexp(1.0, -8) : d == DType::float16 ? std::ldexp(1.0, -11) : u;
  const double half_subnormal = d == DType::bfloat16 ? std::ldexp(1.0, -134) : d == DType::float16 ? std::ldexp(1.0, -25) : std::ldexp(1.0, -150);
  const double k = static_cast<double>(ops::find(op).reduction_length(params)) + 1;
  ops::TorchLeaves sq;
  for (const auto& [name, t] : leaves) {
    at::Tensor s2 = t.detach().to(at::kFloat).square();
    const bool want = only.empty() || std::find(only.begin(), only.end(), name) != only.end();
    sq.emplace(name, want ? s2.requires_grad_(true) : s2);
  }
  at::Tensor y2 = ops::torch_forward(params, sq);
  at::Tensor rho_y = y2.detach().clamp_min(0).sqrt();
  at::Tensor yv = y.detach().to(at::kFloat).abs();
  const double n_out = static_cast<double>(yv.numel());
  const double round_out = d == DType::float32 ? 0.0 : 2.0;
  at::Tensor dy = (y.detach().to(at::kFloat) - target).abs() * (2.0 / n_out);
  // The forward's accumulation covers its partial sums: |y| + rho_y, or those measured on a user's
  // tensor (partial_sum_bounds), when larger.
  at::Tensor acc = partial_sums ? at::maximum(yv + rho_y, *partial_sums) : yv + rho_y;
  at::Tensor m = dy + (2.0 / n_out) * (round_out * yv + std::sqrt(k) * (u / ud) * acc) + half_subnormal / ud;
  acc = at::Tensor();
  // A gradient's accumulation term needs the root-sum-square of its actual products, whose dL/dy
  // factor is at most dy + u_d m; the widened m serves its u_p term. Both come from one backward
  // (it is linear in the squared upstream): S^2 = sum (n (u/u_d)^2 (dy + u_d m)^2 + m^2) x^2, with
  // n the largest reduction length among the gradients (as compare counts it), so that
  // u_d S >= sqrt(n u^2 rho_a^2 + u_d^2 rho_p^2) for every one (docs/compare.md, "Error bounds").
  double n_max = 1;
  for (const auto& [name, t] : sq)
    if (t.requires_grad()) n_max = std::max(n_max, gradient_reduction_length(name, t.numel(), n_out, k - 1));
  at::Tensor a = dy + ud * m;
  if (choice) choice_statistical(*choice, sq, y2, rho_y, d, k, n_max);
  y2.backward(m.square() + (n_max * (u / ud) * (u / ud)) * a.square());
  grads.clear();
  for (const auto& [name, t] : sq)
    if (t.requires_grad()) grads.emplace(name, t.grad());
  return y2.detach();
}

// Partial sums on the data at hand (docs/compare.md, "Partial sums on the data at hand"). A
// correct stack's accumulation error is a walk over its partial sums s_k, bounded by
// lambda u sqrt(n) max|s_k|; the scale's model puts max|s_k| near |y| + rho, which holds for fills
// that draw every element alike, whatever the order, but not for a user's tensor ordered along the
// sum (weights of one sign over the first half of the channels climb to many times |y|). This
// measures, per element, a bound on |s_k| for every order that takes the sum in contiguous ranges
// of the reduction's index, nested as the op's canonical loop or with its outer axis innermost
// (NCHW and NHWC kernels), forward, backward or split into ranges, in any order inside a range:
// the index is cut into kPartialSumChunks chunks; with S_j the sum of the chunks before j, T_j and
// A_j the chunk's sum and sum of |terms|, every such partial sum is within
// (max S_j - min S_j) + 2 max (A_j + |T_j|) / 2 of zero (a range of chunks is a difference of two
// S_j; a chunk's own part is at most its larger signed half, (A_j + |T_j|) / 2, at each end).
// The op's bias, one more term, adds |bias|. One forward (and backward, for a gradient) of the op
// per chunk with the carrier operand zeroed outside it (ops::OpDef::reductions); float32.
struct PartialSumRange {
  at::Tensor s, hi, lo, half;
  void add(const at::Tensor& t, const at::Tensor& a) {
    if (!s.defined()) s = at::zeros_like(t), hi = at::zeros_like(t), lo = at::zeros_like(t), half = at::zeros_like(t);
    s.add_(t);
    hi = at::maximum(hi, s);
    lo = at::minimum(lo, s);
    half = at::maximum(half, (a + t.abs()) * 0.5);
  }
  at::Tensor bound() const { return hi - lo + 2 * half; }
};

// The position of each element of `carrier` along `nesting` (its reduction axes, outer to inner),
// flattened, shaped to broadcast over the carrier's other axes.
at::Tensor nested_index(const at::Tensor& carrier, const std::vector<int>& nesting) {
  std::vector<std::int64_t> sizes;
  for (int a : nesting) sizes.push_back(carrier.size(a));
  std::vector<int> sorted = nesting;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int64_t> perm, shape(static_cast<std::size_t>(carrier.dim()), 1);
  for (int a : sorted) {
    perm.push_back(std::find(nesting.begin(), nesting.end(), a) - nesting.begin());
    shape[static_cast<std::size_t>(a)] = carrier.size(a);
  }
  std::int64_t count = 1;
  for (auto s : sizes) count *= s;
  return at::arange(count, at::TensorOptions().dtype(at::kLong)).view(sizes).permute(perm).reshape(shape).to(carrier.device());
}

// The op on `in` with its reduction's carrier multiplied by `mask` and the bias zeroed: the
// output, or the gradient `r.tensor` of the backward from `dy`.
at::Tensor masked_pass(const ops::OpParams& params, const ops::TorchLeaves& in, const at::Tensor& dy,
                       const ops::OpDef::Reduction& r, const at::Tensor& mask) {
  const std::string tensor = r.tensor, carrier = r.carrier;
  const bool output = tensor == "output";
  const std::string leaf = output ? "" : tensor.substr(5);
  ops::TorchLeaves l;
  for (const auto& [name, t] : in) {
    at::Tensor v = name == "bias" ? at::zeros_like(t) : name == carrier ? t * mask : t;
    l.emplace(name, name == leaf ? v.detach().requires_grad_(true) : v);
  }
  at::Tensor y = ops::torch_forward(params, l);
  if (output) return y.detach();
  y.backward(carrier == "dy" ? dy * mask : dy);
  return l.at(leaf).grad().detach();
}

// Per output and gradient of the op, the bound on every partial sum above (float32, the op's
// device); `dy` is dL/dy.
std::map<std::string, at::Tensor> partial_sum_bounds(const ops::OpParams& params, const ops::TorchLeaves& leaves,
                                                     const at::Tensor& dy, cases::Op op) {
  ops::TorchLeaves x, ax;
  for (const auto& [name, t] : leaves) {
    x.emplace(name, t.detach().to(at::kFloat));
    ax.emplace(name, x.at(name).abs());
  }
  const at::Tensor d = dy.detach().to(at::kFloat), ad = d.abs();
  std::map<std::string, at::Tensor> out;
  for (const auto& r : ops::find(op).reductions()) {
    std::vector<std::vector<int>> nestings{r.axes};
    if (r.axes.size() > 1) {
      std::vector<int> inner(r.axes.begin() + 1, r.axes.end());
      inner.push_back(r.axes.front());
      nestings.push_back(inner);
    }
    const at::Tensor& carrier = std::string(r.carrier) == "dy" ? d : x.at(r.carrier);
    at::Tensor m;
    for (const auto& nesting : nestings) {
      const at::Tensor index = nested_index(carrier, nesting);
      const std::int64_t count = index.numel(), chunks = std::min<std::int64_t>(cases::kPartialSumChunks, count);
      PartialSumRange range;
      for (std::int64_t j = 0; j < chunks; ++j) {
        const at::Tensor mask = ((index >= j * count / chunks) & (index < (j + 1) * count / chunks)).to(at::kFloat);
        range.add(masked_pass(params, x, d, r, mask), masked_pass(params, ax, ad, r, mask));
      }
      m = m.defined() ? at::maximum(m, range.bound()) : range.bound();
    }
    if (std::string(r.tensor) == "output" && x.count("bias")) {  // the bias alone: every other leaf zero
      ops::TorchLeaves b;
      for (const auto& [name, t] : x) b.emplace(name, name == "bias" ? t : at::zeros_like(t));
      m = m + ops::torch_forward(params, b).detach().abs();
    }
    out.emplace(r.tensor, m);
  }
  return out;
}

// |H| v for the MSE loss of an op that is linear in its parameters (conv2d, conv_transpose2d,
// matmul; the bias too): H = (2/N) J^T J with J = dy/dparams, which holds the data inputs' values,
// so |H| v <= (2/N) |J|^T (|J| v), the op's forward with |data| and v as parameters, then the
// backward of (2/N) <z, forward> with respect to them. `data` are the non-parameter leaves; v and
// the result are CPU float64 tensors shaped like the parameters.
std::map<std::string, at::Tensor> abs_hessian_times(const ops::OpParams& params, const ops::TorchLeaves& data,
                                                    const std::map<std::string, at::Tensor>& v, double n_out,
                                                    const at::Device& dev) {
  ops::TorchLeaves in;
  for (const auto& [name, t] : data) in.emplace(name, t.detach().to(at::kFloat).abs());
  for (const auto& [name, t] : v) in.emplace(name, t.to(dev, at::kFloat).requires_grad_(true));
  at::Tensor z = ops::torch_forward(params, in);
  z.backward(z.detach() * (2.0 / n_out));
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, t] : v) out.emplace(name, in.at(name).grad().detach().to(at::kCPU, at::kDouble));
  return out;
}

// f applied to every element of a CPU float64 tensor (a fresh one, same shape).
template <class F>
at::Tensor map_elements(const at::Tensor& t, F f) {
  at::Tensor c = t.to(at::kCPU, at::kDouble).contiguous();
  at::Tensor out = at::empty_like(c);
  const double* p = c.data_ptr<double>();
  double* q = out.data_ptr<double>();
  for (std::int64_t i = 0, n = c.numel(); i < n; ++i) q[i] = f(p[i], i);
  return out;
}

// The two-stack bounds of an SGD trajectory's checkpoints (docs/training.md, "Checkpoint bounds"):
// how far two correct stacks that start from the same parameters and batches may be apart at step
// k, element by element. Each step's gradient is held to twice its single-step bound (metrics
// bounds.hpp, at lambda = kCheckpointLambda, from the scale pass at the reference's point); that
// difference is carried through the case's SGD (momentum, dampening, Nesterov) and the steps add
// in root-sum-square, plus the float32 roundings of each update. What a parameter difference does
// to the later gradients, H e (and weight decay's wd e), is left out of the sum: on this convex
// loss a converging SGD shrinks it along every stiff direction and keeps it along the flat ones
// (stated in docs/training.md, and checked by the correct stacks of the training workflows). Mixed precision adds one term that is
// not small: the forward sees the masters cast to the case dtype, and two masters a hair apart on
// either side of a rounding midpoint cast one ULP apart, so every step s >= 1 adds |H| ulp_d(w).
constexpr double kCheckpointLambda = 8;
struct TrajectoryBounds {
  std::map<std::string, at::Tensor> e;  // parameter difference bound (CPU float64)
  // Running sums of the steps' squared gradient bounds, weighted as torch_trajectory says, and
  // the update roundings' linear sum.
  std::map<std::string, at::Tensor> a0, a1, a2, linear;
};

}  // namespace

Result<TorchDevice> open_torch_device(const std::string& requested, bool allow_tf32, int threads) {
  install_huge_page_allocator();
  TorchDevice d;
  d.requested = requested;
  d.allow_tf32 = allow_tf32;
  if (requested == "cpu") {
    d.used = "cpu";
  } else if (requested == "cuda" || requested.rfind("cuda:", 0) == 0) {
    int index = 0;
    if (requested.size() > 5) {
      char* end = nullptr;
      long v = std::strtol(requested.c_str() + 5, &end, 10);
      if (*end || v < 0) return Error{"--device '" + requested + "': expected cuda:N"};
      index = static_cast<int>(v);
    }
    if (!torch::cuda::is_available()) {
      d.used = "cpu";
      d.fallback_reason = core::no_usable_cuda_device(torch_cuda_unusable_reason());
    } else if (index >= static_cast<int>(torch::cuda::device_count())) {
      d.used = "cpu";
      d.fallback_reason = "cuda:" + std::to_string(index) + " does not exist (" +
                          std::to_string(torch::cuda::device_count()) + " devices)";
    } else {
      d.used = "cuda:" + std::to_string(index);
    }
  } else {
    return Error{"--device '" + requested + "': expected cpu, cuda or cuda:N"};
  }
  // TF32 silently changes float32 results on Ampere and later; off unless asked for.
  at::globalContext().setAllowTF32CuDNN(allow_tf32);
  at::globalContext().setAllowTF32CuBLAS(allow_tf32);
  at::globalContext().setBenchmarkCuDNN(false);
  at::globalContext().setDeterministicCuDNN(true);
  const ThreadChoice tc = choose_threads(threads);
  at::set_num_threads(tc.threads);
  d.threads = at::get_num_threads();
  d.threads_source = tc.source;
  return d;
}

Result<std::map<std::string, Tensor>> torch_compute(const cases::Case& c, cases::Op op,
                                                    const std::map<std::string, const Tensor*>& in,
                                                    const TorchDevice& device, Json* info, TorchTimes* times,
                                                    bool scales) {
  using Clock = std::chrono::steady_clock;
  double conv_s = 0;
  auto timed = [&](auto&& f) {  // conversion time of f()
    const auto t = Clock::now();
    auto r = f();
    conv_s += std::chrono::duration<double>(Clock::now() - t).count();
    return r;
  };
  const auto t_start = Clock::now();
  const at::Device dev(device.used);
  const DtypePlan plan(c.dtype, dev);
  // Results leave LibTorch without a copy. An emulated bfloat16 result (stored as float32) is
  // rounded in place in that buffer (round to nearest even, as LibTorch's conversion;
  // t.to(kBFloat16) and back cost 700 MB of transient buffers on the largest gradient); a float16
  // one is rounded by its conversion to the float16 storage.
  auto result = [&](const at::Tensor& t) {
    return timed([&] {
      Tensor r = adopt_from_torch(t, plan.storage);
      if (plan.emulate && plan.logical == at::kBFloat16) {
        round_to_bfloat16_inplace(r.data<float>(), static_cast<std::size_t>(r.numel()));
      }
      return r;
    });
  };
  std::map<std::string, Tensor> out;
  try {
    auto leaf = [&](const char* name) { return timed([&] { return to_torch(*in.at(name), plan.compute, dev); }).requires_grad_(true); };
    at::Tensor target = timed([&] { return to_torch(*in.at("target"), at::kFloat, dev); });
    const cases::OpInstance* inst = c.find(op);
    if (!inst) return Error{std::string("LibTorch reference: case ") + c.name + " has no " + cases::op_name(op)};
    // Every input but the target is a leaf; the op's forward is its own (harness/ops/<op>/<op>_torch.cpp).
    const auto table = c.tensors(op);
    ops::TorchLeaves leaves;
    for (const auto& t : table)
      if (t.role == cases::Role::input && t.name != "target") leaves.emplace(t.name, leaf(t.name.c_str()));
    at::Tensor y_sum = ops::torch_forward(inst->params, leaves);
    at::Tensor y = plan.narrow(y_sum);
    // A bfloat16/float16 case computed in float32 (on the CPU) keeps its graph for the dL/dy
    // choice's backward (choice_deterministic), which then needs no forward of its own.
    // An op with a user's tensor measures its partial sums instead (partial_sum_bounds), whose
    // model the choice's flips were not bounded with.
    const bool user = scales && c.has_user_tensor(op);
    const bool choice_wanted = scales && c.dtype != DType::float32 && !user;
    const bool reuse = choice_wanted && y_sum.scalar_type() == at::kFloat;

    // Loss on the output upcast to float32, as DESIGN.md defines it.
    at::Tensor loss = torch::mse_loss(y.to(at::kFloat), target);
    loss.backward({}, /*retain_graph=*/reuse);

    // Results in the table's order: output, loss, then grad_<x> for each leaf x.
    for (const auto& t : table) {
      if (t.role == cases::Role::output) out.emplace(t.name, result(y));
      else if (t.role == cases::Role::loss) out.emplace(t.name, timed([&] { return from_torch(loss, DType::float32); }));
      else if (t.role == cases::Role::grad) out.emplace(t.name, result(leaves.at(t.name.substr(5)).grad()));
    }
    if (scales) {
      std::map<std::string, at::Tensor> g2;
      std::optional<ChoiceTerms> choice;  // bfloat16 and float16: dL/dy's rounding, stored
      if (choice_wanted)
        choice = choice_deterministic(inst->params, leaves, y, target, c.dtype, reuse ? &y_sum : nullptr);
      y_sum = at::Tensor();
      std::map<std::string, at::Tensor> walk;
      if (user) walk = partial_sum_bounds(inst->params, leaves, (y.detach().to(at::kFloat) - target) * (2.0 / y.numel()), op);
      at::Tensor y2 = scale_pass(inst->params, leaves, y, target, c.dtype, op, {}, g2, choice ? &*choice : nullptr,
                                 user ? &walk.at("output") : nullptr);
      // The scale widened so that the bound's accumulation term covers the measured partial sums
      // M: an output's lambda u sqrt(n) (|y| + rho) with rho >= M - |y|; a gradient's
      // lambda (u sqrt(n) |g| + u_d S) with S grown by sqrt(n) (u / u_d) (M - |g|), n as compare
      // counts it. |y| and |g| as stored, as compare reads them.
      auto widen = [&](at::Tensor& s, const std::string& tensor) {
        auto it = walk.find(tensor);
        if (it == walk.end()) return;
        if (tensor == "output") {
          s = at::maximum(s, it->second - y.detach().to(at::kFloat).abs());
          return;
        }
        const std::string leaf = tensor.substr(5);
        const at::Tensor& g = leaves.at(leaf).grad();
        const double k_op = static_cast<double>(ops::find(op).reduction_length(inst->params));
        const double n = gradient_reduction_length(leaf, g.numel(), static_cast<double>(y.numel()), k_op);
        const double ratio = compare::unit_roundoff(DType::float32) / compare::unit_roundoff(c.dtype);
        s = s + (std::sqrt(n) * ratio) * (it->second - round_to(g.detach(), c.dtype).abs()).clamp_min(0);
      };
      auto scale = [&](at::Tensor& sq_sum, const std::string& tensor) {  // the root in place: no second copy of the largest
        return timed([&] {
          sq_sum.clamp_min_(0).sqrt_();
          widen(sq_sum, tensor);
          return adopt_from_torch(sq_sum.is_contiguous() ? sq_sum : sq_sum.contiguous(), DType::float32);
        });
      };
      for (const auto& t : table) {
        if (t.role == cases::Role::output) out.emplace(t.name + "_scale", scale(y2, t.name));
        else if (t.role == cases::Role::grad) out.emplace(t.name + "_scale", scale(g2.at(t.name.substr(5)), t.name));
        if (t.role == cases::Role::grad && choice)
          out.emplace(t.name + "_choice", timed([&] {
                        return adopt_from_torch(choice->spread.at(t.name.substr(5)).contiguous(), DType::float32);
                      }));
      }
    }
  } catch (const c10::Error& e) {
    return Error{std::string("LibTorch failed on ") + c.name + " " + cases::op_name(op) + ": " +
                 e.what_without_backtrace()};
  }
  if (times) {
    times->conversion_s += conv_s;
    times->compute_s += std::chrono::duration<double>(Clock::now() - t_start).count() - conv_s;
  }
  if (info) {
    (*info)["compute_dtype"] = plan.emulate ? "float32" : dtype_name(c.dtype);
    if (plan.emulate)
      (*info)["note"] = "CPU reference: computed in float32 from the " + std::string(dtype_name(c.dtype)) +
                        " inputs; output, dL/dy and gradients rounded to " + std::string(dtype_name(c.dtype));
  }
  return out;
}

Result<std::map<std::string, Tensor>> torch_trajectory(const cases::Case& c, cases::Op op,
                                                       const std::map<std::string, const Tensor*>& in,
                                                       const StepInputs& step_inputs, const TorchDevice& device,
                                                       TorchTimes* times, bool scales) {
  using Clock = std::chrono::steady_clock;
  const auto t_start = Clock::now();
  const std::string where = std::string("LibTorch trajectory of ") + c.name + " " + cases::op_name(op);
  if (!c.train) return Error{where + ": the case has no \"train\""};
  const cases::OpInstance* inst = c.find(op);
  if (!inst) return Error{where + ": the case has no such op"};
  if (c.train->steps > 1 && !step_inputs) return Error{where + ": no source for the later steps' batches"};
  const train::TrainConfig& tc = *c.train;
  const at::Device dev(device.used);
  const std::vector<std::int64_t> keep = train::checkpoint_steps(tc);
  // Mixed precision, as torch.autocast trains (docs/training.md, "Mixed precision"): the parameters
  // and the optimizer stay float32; the forward sees them cast to the case dtype (DtypePlan, as
  // torch_compute computes), whose backward casts the gradient the optimizer receives back through
  // it. float32 cases: every cast is the identity.
  const DtypePlan plan(c.dtype, dev);
  std::map<std::string, Tensor> out;
  try {
    // The parameters are owned copies (the optimizer updates them in place); the rest of the inputs
    // are drawn anew every step.
    ops::TorchLeaves params;
    std::vector<at::Tensor> list;
    for (const auto& p : c.parameters(op)) {
      at::Tensor t = to_torch(*in.at(p.name), at::kFloat, dev).clone().requires_grad_(true);
      params.emplace(p.name, t);
      list.push_back(t);
    }
    // LibTorch's own optimizer (the same update as torch.optim.SGD / torch.optim.Adam): the
    // reference is what PyTorch does.
    std::unique_ptr<torch::optim::Optimizer> optimizer;
    switch (tc.optimizer) {
      case train::Optimizer::sgd:
        optimizer = std::make_unique<torch::optim::SGD>(list, torch::optim::SGDOptions(tc.lr)
                                                                  .momentum(tc.momentum)
                                                                  .dampening(tc.dampening)
                                                                  .weight_decay(tc.weight_decay)
                                                                  .nesterov(tc.nesterov));
        break;
      case train::Optimizer::adam:
        optimizer = std::make_unique<torch::optim::Adam>(
            list, torch::optim::AdamOptions(tc.lr).betas({tc.beta1, tc.beta2}).eps(tc.eps).weight_decay(tc.weight_decay));
        break;
    }
    torch::optim::Optimizer& opt = *optimizer;
    // Checkpoint bounds: SGD only (Adam divides each update by the root of its second moment, which
    // near eps turns a gradient's rounding into an update of any size: its checkpoints keep the
    // fixed gate).
    const bool bound = scales && tc.optimizer == train::Optimizer::sgd;
    const bool narrow = c.dtype != DType::float32;
    const double u = std::ldexp(1.0, -24);
    const double k_op = static_cast<double>(ops::find(op).reduction_length(inst->params));
    TrajectoryBounds tb;
    if (bound)
      for (const auto& [name, p] : params) {
        for (auto* m : {&tb.e, &tb.a0, &tb.a1, &tb.a2, &tb.linear})
          m->emplace(name, at::zeros(p.sizes(), at::TensorOptions().dtype(at::kDouble)));
      }
    Tensor losses(DType::float32, Shape{tc.steps});
    for (std::int64_t s = 0; s < tc.steps; ++s) {
      std::map<std::string, Tensor> drawn;
      if (s > 0) drawn = step_inputs(s);
      auto data = [&](const std::string& name) -> const Tensor& {
        if (s == 0) return *in.at(name);
        auto it = drawn.find(name);
        if (it == drawn.end()) throw std::out_of_range("step " + std::to_string(s) + " has no input '" + name + "'");
        return it->second;
      };
      // As torch_compute: every input but the target is a leaf, so step 0 is the single step exactly.
      ops::TorchLeaves leaves = params;
      for (const auto& t : c.inputs(op))
        if (!t.parameter && t.name != "target") leaves.emplace(t.name, to_torch(data(t.name), plan.compute, dev).requires_grad_(true));
      for (const auto& [name, p] : params) leaves[name] = plan.narrow(p);
      const at::Tensor target = to_torch(data("target"), at::kFloat, dev);
      opt.zero_grad();
      const at::Tensor y = plan.narrow(ops::torch_forward(inst->params, leaves));
      at::Tensor loss = torch::mse_loss(y.to(at::kFloat), target);
      loss.backward();
      const float l = loss.item<float>();
      if (!std::isfinite(l)) return Error{where + ": the loss is " + std::to_string(l) + " at step " + std::to_string(s) + " (the trajectory diverged)"};
      losses.data<float>()[s] = l;
      const bool kept = std::binary_search(keep.begin(), keep.end(), s);
      if (kept) {
        for (const auto& [name, p] : params) out.emplace(train::checkpoint_tensor(s, name), from_torch(p, DType::float32));
        for (const auto& [name, p] : params)
          out.emplace(train::checkpoint_tensor(s, "grad_" + name), from_torch(p.grad(), plan.storage));
      }
      std::map<std::string, at::Tensor> delta, w_before;  // this step's gradient bound, two stacks
      if (bound) {
        ops::TorchLeaves data;
        std::map<std::string, at::Tensor> sq;
        for (const auto& [name, t] : leaves)
          if (!params.count(name)) data.emplace(name, t);
        std::vector<std::string> names;
        for (const auto& [name, p] : params) names.push_back(name);
        scale_pass(inst->params, leaves, y, target, c.dtype, op, names, sq);
        const double n_out = static_cast<double>(y.numel());
        std::map<std::string, at::Tensor> cast;  // mixed precision: a cast one ULP apart (s >= 1)
        for (const auto& [name, p] : params) {
          w_before.emplace(name, p.detach().to(at::kCPU, at::kDouble));
          const at::Tensor g = p.grad().detach().to(at::kCPU, at::kDouble).contiguous();
          const at::Tensor rho = sq.at(name).clamp_min(0).sqrt().to(at::kCPU, at::kDouble).contiguous();
          compare::BoundOptions o;
          o.dtype = c.dtype;
          o.gradient = true;
          o.n = gradient_reduction_length(name, p.numel(), n_out, k_op);
          o.lambda = kCheckpointLambda;
          o.split_gradient = true;  // the scale pass's gradient scale (bounds.hpp)
          const double* pr = rho.data_ptr<double>();
          delta.emplace(name, map_elements(g, [&](double v, std::int64_t i) { return 2 * compare::side_bound(v, pr[i], o); }));
          if (narrow && s >= 1)
            cast.emplace(name, map_elements(w_before.at(name), [&](double v, std::int64_t) { return compare::dtype_ulp(v, c.dtype); }));
        }
        if (!cast.empty()) {
          const auto hc = abs_hessian_times(inst->params, data, cast, n_out, dev);
          for (auto& [name, d] : delta) d.add_(hc.at(name));
        }
        if (kept) {
          // The parameter: the difference carried so far, plus each side's float32 storage. Its
          // gradient: this step's own bound, plus what the parameters' difference (and a cast one
          // ULP apart) moves it by, |H| (e + ulp_d).
          std::map<std::string, at::Tensor> apart;
          for (const auto& [name, e] : tb.e) apart.emplace(name, cast.count(name) ? e + cast.at(name) : e.clone());
          const auto he = abs_hessian_times(inst->params, data, apart, n_out, dev);
          // Stored per unit lambda and per side: compare's two-stack bound is 2 lambda scale, this
          // bound at lambda = 8 (rounded up into float32).
          auto stored = [&](const at::Tensor& b, const at::Tensor& like) {
            return adopt_from_torch((b * ((1 + 0x1p-20) / (2 * kCheckpointLambda))).to(at::kFloat).reshape(like.sizes()).contiguous(),
                                    DType::float32);
          };
          for (const auto& [name, p] : params) {
            const at::Tensor pb = tb.e.at(name) + 2 * u * w_before.at(name).abs();
            out.emplace(train::checkpoint_tensor(s, name) + "_scale", stored(pb, p));
            out.emplace(train::checkpoint_tensor(s, "grad_" + name) + "_scale", stored(delta.at(name) + he.at(name), p));
          }
        }
      }
      opt.step();
      if (bound) {
        // Gradient s reaches the parameter at step k through every update from s to k - 1:
        // torch.optim.SGD's buffer takes it whole at step 0 and (1 - dampening) of it later, and
        // keeps mu^(t - s) of it at step t; the update is lr times the buffer (Nesterov: lr (g + mu
        // buf)). So its weight in step k's parameter is lr C(k, s), C = a + b (1 - mu^(k - s)),
        // a = 1 for Nesterov (else 0), b = (mu for Nesterov, else 1) (1 - d_s) / (1 - mu); C = 1
        // without momentum. The steps' bounds add in root-sum-square (their roundings are
        // independent, the model of every bound here): sum_s lr^2 C^2 delta_s^2 =
        // lr^2 (A0 - 2 A1 + A2), A0 = sum (a + b)^2 delta^2, A1 = sum (a + b) b mu^(k - s) delta^2,
        // A2 = sum b^2 mu^(2 (k - s)) delta^2, kept as running sums. Weight decay acts on the
        // parameters' difference as a contraction (-lr wd e), like H, and is left out with it.
        // The float32 roundings of each update add linearly (tiny): the stored parameter, and the
        // product, the buffer's add and the step's subtraction on the update's size, the buffer's
        // carried up to 1 / (1 - mu) times.
        const double mu = tc.momentum, carry = mu < 1 ? 1 / (1 - mu) : 1;
        const double damp = s == 0 ? 0 : tc.dampening;
        const double a = mu > 0 && tc.nesterov ? 1 : 0;
        const double b = mu > 0 ? (tc.nesterov ? mu : 1) * (1 - damp) / (1 - mu) : 0;
        const double c0 = mu > 0 ? a + b : 1;
        for (const auto& [name, p] : params) {
          const at::Tensor d2 = delta.at(name).square();
          tb.a0.at(name) += c0 * c0 * d2;
          tb.a1.at(name) = mu * (tb.a1.at(name) + c0 * b * d2);
          tb.a2.at(name) = mu * mu * (tb.a2.at(name) + b * b * d2);
          const at::Tensor w_after = p.detach().to(at::kCPU, at::kDouble);
          tb.linear.at(name) += 2 * u * (w_after.abs() + (3 + carry) * (w_after - w_before.at(name)).abs());
          tb.e.at(name) = tc.lr * (tb.a0.at(name) - 2 * tb.a1.at(name) + tb.a2.at(name)).clamp_min(0).sqrt() +
                          tb.linear.at(name);
        }
      }
    }
    out.emplace(train::kLossCurve, std::move(losses));
  } catch (const c10::Error& e) {
    return Error{where + ": " + e.what_without_backtrace()};
  } catch (const std::out_of_range& e) {
    return Error{where + ": " + e.what()};
  }
  if (times) times->compute_s += std::chrono::duration<double>(Clock::now() - t_start).count();
  return out;
}

Json torch_system_info(const TorchDevice& device) {
  Json j;
  j["libtorch_version"] = TORCH_VERSION;
  j["threads"] = at::get_num_threads();
  if (!device.threads_source.empty()) j["threads_source"] = device.threads_source;
  j["blas"] = blas_info();  // includes omp_max_threads: OpenBLAS-OpenMP runs on that many threads
  j["hardware_threads"] = std::thread::hardware_concurrency();
  j["device_requested"] = device.requested;
  j["device"] = device.used;
  if (!device.fallback_reason.empty()) j["device_fallback"] = device.fallback_reason;
  // The CUDA runtime this LibTorch loaded ("13.0"), null for a CPU-only LibTorch.
  j["libtorch_cuda"] = nullptr;
  if (const std::string cudart = loaded_cudart(); !cudart.empty()) {
    if (void* h = dlopen(cudart.c_str(), RTLD_LAZY | RTLD_NOLOAD)) {
      if (auto fn = reinterpret_cast<int (*)(int*)>(dlsym(h, "cudaRuntimeGetVersion"))) {
        int v = 0;
        if (fn(&v) == 0) j["libtorch_cuda"] = std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
      }
      dlclose(h);
    }
  }
  j["cuda_available"] = torch::cuda::is_available();
  j["cuda_device_count"] = torch::cuda::is_available() ? torch::cuda::device_count() : 0;
  auto& hooks = at::detail::getCUDAHooks();
  if (hooks.hasCUDA()) {
    j["cudnn_version"] = hooks.versionCuDNN();
    j["cuda_config"] = hooks.showConfig();
  }
  std::string smi = run_command("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null");
  if (!smi.empty()) j["gpus"] = smi;
  j["tf32"] = {{"cudnn", at::globalContext().allowTF32CuDNN()}, {"cublas", at::globalContext().allowTF32CuBLAS()}};
  j["cudnn_deterministic"] = at::globalContext().deterministicCuDNN();
  j["cudnn_benchmark"] = at::globalContext().benchmarkCuDNN();
  return j;
}

}  // namespace validate::generate
