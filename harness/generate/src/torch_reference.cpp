// The generator's LibTorch driver (with each op's <op>_torch.cpp, torch_scales.cpp and
// torch_trajectory.cpp, the only LibTorch translation units: their headers cost ~20 s each): the
// device, leaves, the op's forward, MSE loss, backward, results and their scales.
#include "validate/generate/torch_reference.hpp"

#include "torch_internal.hpp"

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

namespace detail {

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

}  // namespace detail

using namespace detail;

namespace {

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

    // Loss on the output upcast to float32: the loss every backend computes (docs/cudnn.md, docs/runners.md).
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
        if (t.role == cases::Role::output && choice && choice->after_term.defined())  // the bias added after
          out.emplace(t.name + "_choice", timed([&] { return adopt_from_torch(choice->after_term.contiguous(), DType::float32); }));
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
