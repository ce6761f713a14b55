#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "internal.hpp"
#include "validate/gpu/cast.hpp"
#include "validate/gpu/permute.hpp"
#include "validate/layout/convert.hpp"

namespace validate::runners::cudnn_detail {

namespace {

// The CUDNN_CONVOLUTION_*_ALGO_ suffixes, indexed by enum value (cudnn_ops.h).
const std::vector<std::string>& names(Direction d) {
  static const std::vector<std::string> fwd{
      "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
      "WINOGRAD",      "WINOGRAD_NONFUSED"};
  static const std::vector<std::string> bwd_data{"ALGO_0",     "ALGO_1",   "FFT",
                                                 "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  static const std::vector<std::string> bwd_filter{
      "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
  switch (d) {
    case Direction::fwd:
      return fwd;
    case Direction::bwd_data:
      return bwd_data;
    case Direction::bwd_filter:
      return bwd_filter;
  }
  return fwd;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

const char* direction_name(Direction d) {
  switch (d) {
    case Direction::fwd:
      return "fwd";
    case Direction::bwd_data:
      return "bwd_data";
    case Direction::bwd_filter:
      return "bwd_filter";
  }
  return "?";
}

int algo_count(Direction d) { return static_cast<int>(names(d).size()); }

std::string algo_name(Direction d, int algo) {
  const auto& n = names(d);
  return algo >= 0 && algo < static_cast<int>(n.size()) ? n[static_cast<std::size_t>(algo)]
                                                        : std::to_string(algo);
}

Result<AlgoRequest> parse_algo(Direction d, const std::string& text) {
  if (text == "auto") return AlgoRequest{AlgoRequest::automatic, -1};
  if (text == "all") return AlgoRequest{AlgoRequest::all, -1};
  const auto& n = names(d);
  // Accept the full enum name too (CUDNN_CONVOLUTION_FWD_ALGO_FFT), as people copy it from code.
  std::string t = text;
  for (const char* prefix : {"CUDNN_CONVOLUTION_FWD_ALGO_", "CUDNN_CONVOLUTION_BWD_DATA_ALGO_",
                             "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_"})
    if (t.rfind(prefix, 0) == 0) t = t.substr(std::strlen(prefix));
  for (std::size_t i = 0; i < n.size(); ++i)
    if (t == n[i]) return AlgoRequest{AlgoRequest::named, static_cast<int>(i)};
  if (!t.empty() && t.find_first_not_of("0123456789") == std::string::npos && t.size() < 3) {
    const int v = std::stoi(t);
    if (v < static_cast<int>(n.size())) return AlgoRequest{AlgoRequest::named, v};
  }
  return Error{fmt::format(
      "--algo-{} '{}': not a {} algorithm (auto, all, or one of {}; or its enum number 0-{})",
      d == Direction::fwd        ? "fwd"
      : d == Direction::bwd_data ? "bwd-data"
                                 : "bwd-filter",
      text, direction_name(d), join(n), n.size() - 1)};
}

Result<Parsed> parse_options(const CudnnOptions& opt) {
  Parsed p;
  auto dev = gpu::parse_device(opt.device);
  if (!dev)
    return Error{"--device: " + dev.message() + " (the cudnn backend runs on a CUDA device only)"};
  p.device = *dev;
  // The mode itself depends on the layouts (resolve_conv_mode); only the word is checked here.
  if (opt.conv_mode != "auto" && opt.conv_mode != "xcorr" && opt.conv_mode != "conv")
    return Error{"--conv-mode '" + opt.conv_mode +
                 "': expected auto (the mode the layout's conv2d weight declares), xcorr "
                 "(CUDNN_CROSS_CORRELATION, PyTorch's conv2d) or conv (CUDNN_CONVOLUTION, reads "
                 "the filter flipped)"};
  if (opt.math == "fma")
    p.math = Math::fma;
  else if (opt.math == "tf32")
    p.math = Math::tf32;
  else if (opt.math == "default")
    p.math = Math::library_default;
  else
    return Error{"--math '" + opt.math +
                 "': expected fma (IEEE float32, no TF32), tf32 (TF32 tensor cores allowed) "
                 "or default (the libraries' defaults)"};
  const std::string* texts[] = {&opt.algo_fwd, &opt.algo_bwd_data, &opt.algo_bwd_filter};
  for (int i = 0; i < 3; ++i) {
    auto a = parse_algo(kDirections[i], *texts[i]);
    if (!a) return a.status();
    p.algo[i] = *a;
  }
  if (opt.repeat < 1) return Error{fmt::format("--repeat {}: expected 1 or more", opt.repeat)};
  p.repeat = opt.repeat;
  return p;
}

Result<DeviceTensor> allocate(DType dtype, const layout::Spec& spec, const std::string& axes,
                              const Shape& shape, const std::string& name) {
  DeviceTensor t;
  t.dtype = dtype;
  t.spec = spec;
  t.axes = axes;
  t.shape = shape;
  auto b =
      gpu::DeviceBuffer::allocate(static_cast<std::size_t>(t.numel()) * dtype_size(dtype), name);
  if (!b) return b.status();
  t.buf = std::move(*b);
  return t;
}

Result<DeviceTensor> upload(const Tensor& host, DType dtype, const layout::Spec& spec,
                            const std::string& axes, const std::string& name) {
  auto staged = allocate(host.dtype(), layout::canonical_spec(axes), axes, host.shape(),
                         name + " (as stored)");
  if (!staged) return staged.status();
  VALIDATE_TRY(staged->buf.upload(host.bytes(), host.nbytes()));
  // Narrow first (canonical order), then lay out: the permute moves fewer bytes that way.
  DeviceTensor* canonical = &*staged;
  Result<DeviceTensor> cast_buf = Error{""};
  if (dtype != host.dtype()) {
    cast_buf = allocate(dtype, layout::canonical_spec(axes), axes, host.shape(),
                        name + " (" + std::string(dtype_name(dtype)) + ")");
    if (!cast_buf) return cast_buf.status();
    VALIDATE_TRY(
        gpu::cast(staged->buf.data(), host.dtype(), cast_buf->buf.data(), dtype, host.numel()));
    canonical = &*cast_buf;
  }
  auto out = allocate(dtype, spec, axes, host.shape(), name);
  if (!out) return out.status();
  VALIDATE_TRY(gpu::to_layout(canonical->buf.data(), out->buf.data(), dtype_size(dtype),
                              host.shape(), axes, spec));
  return out;
}

Result<Tensor> download(const DeviceTensor& t, const layout::Spec& read_as, DType storage) {
  auto canonical =
      allocate(t.dtype, layout::canonical_spec(t.axes), t.axes, t.shape, "canonical copy");
  if (!canonical) return canonical.status();
  VALIDATE_TRY(gpu::from_layout(t.buf.data(), canonical->buf.data(), dtype_size(t.dtype), t.shape,
                                t.axes, read_as));
  const DeviceTensor* src = &*canonical;
  Result<DeviceTensor> widened = Error{""};
  if (storage != t.dtype) {
    widened = allocate(storage, layout::canonical_spec(t.axes), t.axes, t.shape, "storage copy");
    if (!widened) return widened.status();
    VALIDATE_TRY(
        gpu::cast(canonical->buf.data(), t.dtype, widened->buf.data(), storage, t.numel()));
    src = &*widened;
  }
  Tensor host(storage, t.shape);
  // cudaMemcpy on the legacy default stream waits for every kernel queued before it, and reports
  // a fault from any of them (checked).
  VALIDATE_TRY(src->buf.download(host.bytes(), host.nbytes()));
  return host;
}

Status reupload(DeviceTensor& dst, const Tensor& host, const std::string& name) {
  if (host.shape() != dst.shape)
    return Error{fmt::format("{} of shape {}, the case's is {}", name,
                             shape_to_string(host.shape()), shape_to_string(dst.shape))};
  auto up = upload(host, dst.dtype, dst.spec, dst.axes, name);
  if (!up) return up.status();
  dst = std::move(*up);
  return Status::ok();
}

bool same_memory(const layout::Spec& a, const layout::Spec& b, const std::string& axes,
                 const Shape& shape) {
  const auto pa = layout::placement(a, axes, shape), pb = layout::placement(b, axes, shape);
  return pa.memory_axes == pb.memory_axes && pa.stride == pb.stride && pa.flipped == pb.flipped;
}

cudnnDataType_t cudnn_type(DType d) {
  switch (d) {
    case DType::bfloat16:
      return CUDNN_DATA_BFLOAT16;
    case DType::float16:
      return CUDNN_DATA_HALF;
    case DType::float64:
      return CUDNN_DATA_DOUBLE;
    default:
      return CUDNN_DATA_FLOAT;
  }
}

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case DType::bfloat16:
      return CUDA_R_16BF;
    case DType::float16:
      return CUDA_R_16F;
    case DType::float64:
      return CUDA_R_64F;
    default:
      return CUDA_R_32F;
  }
}

const char* math_type_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH:
      return "CUDNN_DEFAULT_MATH";
    case CUDNN_TENSOR_OP_MATH:
      return "CUDNN_TENSOR_OP_MATH";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH:
      return "CUDNN_FMA_MATH";
  }
  return "?";
}

const char* cudnn_type_name(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_FLOAT:
      return "CUDNN_DATA_FLOAT";
    case CUDNN_DATA_HALF:
      return "CUDNN_DATA_HALF";
    case CUDNN_DATA_BFLOAT16:
      return "CUDNN_DATA_BFLOAT16";
    case CUDNN_DATA_DOUBLE:
      return "CUDNN_DATA_DOUBLE";
    default:
      return "?";
  }
}

std::vector<std::string> bitwise_differences(const std::map<std::string, Tensor>& a,
                                             const std::map<std::string, Tensor>& b) {
  std::vector<std::string> diff;
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.nbytes() != t.nbytes() ||
        (t.nbytes() && std::memcmp(it->second.bytes(), t.bytes(), t.nbytes()) != 0))
      diff.push_back(name);
  }
  return diff;
}

void run_repeated(const Context& ctx, OpResult& r, const Execute& execute) {
  nlohmann::json timing = nlohmann::json::object();
  auto first = execute(&timing);
  if (!first) {
    r.outcome = RunOutcome::error;
    r.message = first.message();
    return;
  }
  r.info["time_ms"] = timing;
  r.info["repeat"] = ctx.parsed.repeat;
  std::vector<std::string> moved;
  for (int k = 1; k < ctx.parsed.repeat; ++k) {
    auto again = execute(nullptr);
    if (!again) {
      r.outcome = RunOutcome::error;
      r.message = fmt::format("repeat {} of {}: {}", k + 1, ctx.parsed.repeat, again.message());
      return;
    }
    for (auto& n : bitwise_differences(*first, *again))
      if (std::find(moved.begin(), moved.end(), n) == moved.end()) moved.push_back(n);
  }
  if (ctx.parsed.repeat > 1) {
    r.notes.bitwise_deterministic = moved.empty();
    r.notes.nondeterministic_tensors = moved;
  }
  r.outcome = RunOutcome::ok;
  r.outputs = std::move(*first);
}

Status Timer::start() {
  if (!begin_.get()) {
    VALIDATE_GPU_TRY(cudaEventCreate(begin_.out()));
    VALIDATE_GPU_TRY(cudaEventCreate(end_.out()));
  }
  VALIDATE_GPU_TRY(cudaEventRecord(begin_, nullptr));
  return Status::ok();
}

Result<float> Timer::stop() {
  float ms = 0;
  VALIDATE_GPU_TRY(cudaEventRecord(end_, nullptr));
  VALIDATE_GPU_TRY(cudaEventSynchronize(end_));
  VALIDATE_GPU_TRY(cudaEventElapsedTime(&ms, begin_, end_));
  return ms;
}

}  // namespace validate::runners::cudnn_detail
