#pragma once
// The names of a training case's extra tensors (docs/training.md, "Checkpoints"). They are tensors
// of the case like any other — `<case>_<op>_<name>.npy`, hashed, in the metadata and the manifest — so
// verify, merge, --resume and pairing handle them without knowing about training:
//   train_loss                the loss of every step, float32, shape [steps]   (Role::loss_curve)
//   step<k>_<param>           a parameter as step k's forward used it          (Role::checkpoint)
//   step<k>_grad_<param>      its gradient at step k                          (Role::checkpoint)
#include <cstdint>
#include <optional>
#include <string>

namespace validate::train {

inline constexpr const char* kLossCurve = "train_loss";

// "step12_weight" for (12, "weight"); "step12_grad_weight" for (12, "grad_weight").
std::string checkpoint_tensor(std::int64_t step, const std::string& tensor);

struct CheckpointName {
  std::int64_t step = 0;
  std::string tensor;  // "weight", "grad_weight"
};
// The inverse of checkpoint_tensor; nullopt for any other name (a leading zero, a missing part).
std::optional<CheckpointName> parse_checkpoint_tensor(const std::string& name);

}  // namespace validate::train
