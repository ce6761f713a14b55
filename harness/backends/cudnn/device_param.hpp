#pragma once
// One trained parameter on the device (docs/cudnn.md, "Training cases"): the optimizer step of a
// trajectory, SGD or Adam, in the parameter's own memory layout. A float32 parameter is updated in
// place. A bfloat16/float16 parameter trains in mixed precision as the other backends do
// (docs/training.md): a float32 master in the same layout is updated from the gradient widened to
// float32 (exact), then rounded to the case dtype into the buffer cuDNN reads — the forward sees
// the parameter cast to the case dtype. The checkpoints read the master.
#include <string>

#include "internal.hpp"
#include "validate/train/schedule.hpp"

namespace validate::runners::cudnn_detail {

// What the device update does with a case's optimizer and dtype (device-free, tested): the
// kernel's name for info["training"]["update"], or an error for an optimizer it lacks.
Result<std::string> device_update_name(const train::TrainConfig& c, DType dtype);

class DeviceParam {
 public:
  // Restarts the trajectory: `param` takes `host` (canonical, storage dtype) in its layout and
  // dtype, the master (narrow dtypes) takes it in float32, and the optimizer state is cleared.
  Status start(DeviceTensor& param, const Tensor& host, const std::string& name);
  // One optimizer step from `grad` (the parameter's dtype and memory layout: the caller checks).
  Status step(DeviceTensor& param, const DeviceTensor& grad, const train::TrainConfig& c);
  // The checkpoint: the float32 master when there is one, else the parameter in `storage`.
  Result<Tensor> read(const DeviceTensor& param, DType storage) const;
  bool mixed() const { return mixed_; }

 private:
  DeviceTensor master_;                 // float32, the parameter's layout (mixed precision)
  gpu::DeviceBuffer grad32_, s1_, s2_;  // widened gradient; momentum, or Adam's m and v
  std::int64_t t_ = 0;                  // steps taken
  bool mixed_ = false;
};

}  // namespace validate::runners::cudnn_detail
