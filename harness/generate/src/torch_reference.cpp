// The only translation unit of the generator that includes LibTorch (its headers cost ~20 s each).
#include "validate/generate/torch_reference.hpp"

#include <torch/torch.h>
#include <torch/version.h>

#include <cstdio>
#include <cstring>
#include <thread>

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
  // from_blob does not own: clone before our buffer can go away.
  at::Tensor x = torch::from_blob(const_cast<std::byte*>(t.bytes()), shape, torch::TensorOptions().dtype(st)).clone();
  return x.to(dev).to(type);
}

Tensor from_torch(const at::Tensor& x, DType storage) {
  at::ScalarType st = storage == DType::float16 ? at::kHalf : storage == DType::float64 ? at::kDouble : at::kFloat;
  at::Tensor c = x.detach().to(at::kCPU).to(st).contiguous();
  Shape shape(c.sizes().begin(), c.sizes().end());
  Tensor t(storage, shape);
  if (t.nbytes()) std::memcpy(t.bytes(), c.data_ptr(), t.nbytes());
  return t;
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

}  // namespace

Result<TorchDevice> open_torch_device(const std::string& requested, bool allow_tf32) {
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
      d.fallback_reason = "no usable CUDA device (LibTorch: torch::cuda::is_available() is false)";
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
  return d;
}

Result<std::map<std::string, Tensor>> torch_compute(const cases::Case& c, cases::Op op,
                                                    const std::map<std::string, const Tensor*>& in,
                                                    const TorchDevice& device, Json* info) {
  const at::Device dev(device.used);
  const DType storage = storage_dtype(c.dtype);
  at::ScalarType type = compute_type(c.dtype);
  auto run = [&](at::ScalarType t) -> std::map<std::string, Tensor> {
    std::map<std::string, Tensor> out;
    auto leaf = [&](const char* name) { return to_torch(*in.at(name), t, dev).requires_grad_(true); };
    at::Tensor target = to_torch(*in.at("target"), at::kFloat, dev);
    if (op == cases::Op::conv2d) {
      const auto& p = c.conv;
      at::Tensor x = leaf("input"), w = leaf("weight");
      at::Tensor b = p.bias ? leaf("bias") : at::Tensor();
      at::Tensor y = torch::conv2d(x, w, b, {p.stride[0], p.stride[1]}, {p.padding[0], p.padding[1]},
                                   {p.dilation[0], p.dilation[1]}, p.groups);
      // Loss on the output upcast to float32, as DESIGN.md defines it.
      at::Tensor loss = torch::mse_loss(y.to(at::kFloat), target);
      loss.backward();
      out.emplace("output", from_torch(y, storage));
      out.emplace("loss", from_torch(loss, DType::float32));
      out.emplace("grad_input", from_torch(x.grad(), storage));
      out.emplace("grad_weight", from_torch(w.grad(), storage));
      if (p.bias) out.emplace("grad_bias", from_torch(b.grad(), storage));
    } else {
      at::Tensor a = leaf("A"), bm = leaf("B");
      at::Tensor y = torch::matmul(a, bm);
      at::Tensor loss = torch::mse_loss(y.to(at::kFloat), target);
      loss.backward();
      out.emplace("output", from_torch(y, storage));
      out.emplace("loss", from_torch(loss, DType::float32));
      out.emplace("grad_A", from_torch(a.grad(), storage));
      out.emplace("grad_B", from_torch(bm.grad(), storage));
    }
    return out;
  };
  try {
    auto out = run(type);
    if (info) (*info)["compute_dtype"] = dtype_name(c.dtype);
    return out;
  } catch (const c10::Error& e) {
    // LibTorch 1.13 has no CPU float16 convolution. A float16 reference computed in float32 from
    // the same (exactly representable) inputs and rounded once is the more accurate reference; say so.
    if (c.dtype == DType::float16 && device.used == "cpu") {
      try {
        auto out = run(at::kFloat);
        for (auto& [name, t] : out)
          if (name != "loss") t = t.to(DType::float16);
        if (info) {
          (*info)["compute_dtype"] = "float32";
          (*info)["note"] = "this LibTorch cannot run float16 " + std::string(cases::op_name(op)) +
                            " on CPU; computed in float32 and rounded to float16";
        }
        return out;
      } catch (const c10::Error& e2) {
        return Error{std::string("LibTorch failed: ") + e2.what_without_backtrace()};
      }
    }
    return Error{std::string("LibTorch failed on ") + c.name + " " + cases::op_name(op) + ": " +
                 e.what_without_backtrace()};
  }
}

Json torch_system_info(const TorchDevice& device) {
  Json j;
  j["libtorch_version"] = TORCH_VERSION;
  j["threads"] = at::get_num_threads();
  j["hardware_threads"] = std::thread::hardware_concurrency();
  j["device_requested"] = device.requested;
  j["device"] = device.used;
  if (!device.fallback_reason.empty()) j["device_fallback"] = device.fallback_reason;
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
