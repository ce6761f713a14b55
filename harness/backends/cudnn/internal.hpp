#pragma once
// Shared pieces of the cuDNN runner: parsed options, the per-process context (device, handles),
// device tensors held in a layout, and the loss kernel's entry point.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "algo_select.hpp"
#include "handles.hpp"
#include "loss.hpp"
#include "validate/cases/case.hpp"
#include "validate/core/tensor.hpp"
#include "validate/gpu/device.hpp"
#include "validate/gpu/device_buffer.hpp"
#include "validate/gpu/sgd.hpp"
#include "validate/layout/preset.hpp"
#include "validate/backends/cudnn_runner.hpp"

namespace validate::runners::cudnn_detail {

enum class Math { fma, tf32, library_default };

struct Parsed {
  int device = 0;
  // CUDNN_CONVOLUTION (true) or CUDNN_CROSS_CORRELATION: set by make_cudnn_runner from
  // resolve_conv_mode, which matches it to the layouts' conv2d weight spec.
  bool convolution_mode = false;
  Math math = Math::fma;
  AlgoRequest algo[3];
  int repeat = 1;
};
Result<Parsed> parse_options(const CudnnOptions& opt);

// What every case shares: the device, one cuDNN and one cuBLASLt handle (created in prepare()).
struct Context {
  CudnnOptions options;
  Parsed parsed;
  CudnnConvMode conv_mode;  // what resolve_conv_mode chose for these layouts (run_info.json)
  layout::LayoutSet layouts;
  gpu::DeviceInfo device;
  CudnnHandle cudnn;
  LtHandle lt;
};

// A tensor on the device: its bytes are the canonical tensor laid out as `spec`, in `dtype`.
struct DeviceTensor {
  gpu::DeviceBuffer buf;
  DType dtype = DType::float32;
  layout::Spec spec;
  std::string axes;  // canonical axes ("NCHW", ...)
  Shape shape;       // canonical shape
  std::int64_t numel() const { return shape_numel(shape); }
};

// Host canonical tensor (storage dtype) -> device, converted to `dtype` and laid out as `spec`.
Result<DeviceTensor> upload(const Tensor& host, DType dtype, const layout::Spec& spec,
                            const std::string& axes, const std::string& name);
// An uninitialised device tensor.
Result<DeviceTensor> allocate(DType dtype, const layout::Spec& spec, const std::string& axes,
                              const Shape& shape, const std::string& name);
// Device -> host canonical tensor in `storage`, reading the bytes as layout `read_as` (usually the
// tensor's own spec; a different one when the stack returns data in another layout than it was
// given, as cuDNN's dW). Synchronises.
Result<Tensor> download(const DeviceTensor& t, const layout::Spec& read_as, DType storage);

// --- Training (docs/cudnn.md, "Training cases") ---
// Replaces dst's contents with `host` (canonical, storage dtype), converted to dst's dtype and
// layout exactly as `upload` laid it out first; an error when the shapes differ.
Status reupload(DeviceTensor& dst, const Tensor& host, const std::string& name);
// Whether two layouts put every canonical element at the same offset, so that an elementwise
// kernel may combine the two buffers element by element.
bool same_memory(const layout::Spec& a, const layout::Spec& b, const std::string& axes,
                 const Shape& shape);
// The cuDNN / cuBLAS data type of a device dtype.
cudnnDataType_t cudnn_type(DType d);
cudaDataType_t cuda_type(DType d);
const char* math_type_name(cudnnMathType_t m);
const char* cudnn_type_name(cudnnDataType_t t);

// Compares two runs' results bit for bit; returns the names that differ (for --repeat).
std::vector<std::string> bitwise_differences(const std::map<std::string, Tensor>& a,
                                             const std::map<std::string, Tensor>& b);

// Times one region on the default stream with CUDA events (milliseconds).
class Timer {
 public:
  Status start();
  Result<float> stop();

 private:
  Event begin_, end_;
};

// Runs `execute` once (timed into info["time_ms"]) and ctx.parsed.repeat - 1 more times, comparing
// every result bit for bit with the first; fills r's outputs, outcome and info. Nondeterminism is
// recorded (notes.bitwise_deterministic, notes.nondeterministic_tensors), not failed: it is a fact
// about the algorithm that compare's gates then judge.
using Execute = std::function<Result<std::map<std::string, Tensor>>(nlohmann::json* timing)>;
void run_repeated(const Context& ctx, OpResult& r, const Execute& execute);

std::vector<OpResult> run_conv(Context& ctx, const OpTask& task);
std::vector<OpResult> run_matmul(Context& ctx, const OpTask& task);

}  // namespace validate::runners::cudnn_detail
