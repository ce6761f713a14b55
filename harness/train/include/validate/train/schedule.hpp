#pragma once
// What a case's "train" block asks for (docs/training.md): how many optimizer steps, which
// optimizer with which hyper-parameters, and at which steps parameters and gradients are kept.
#include <cstdint>
#include <string>
#include <vector>

#include "validate/core/json_io.hpp"
#include "validate/core/result.hpp"

namespace validate::train {

// SGD with momentum / weight decay / Nesterov as torch.optim.SGD (sgd.hpp); Adam as torch.optim.Adam
// with L2 weight decay, not AMSGrad (adam.hpp).
enum class Optimizer { sgd, adam };
const char* optimizer_name(Optimizer o);  // "sgd", "adam"

struct TrainConfig {
  std::int64_t steps = 1;
  Optimizer optimizer = Optimizer::sgd;
  double lr = 0.01;
  double momentum = 0;      // SGD
  double dampening = 0;     // SGD
  double weight_decay = 0;  // both: added to the gradient, weight_decay * p (L2, not AdamW)
  bool nesterov = false;    // SGD
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // Adam ("betas": [beta1, beta2], "eps")
  // Parameters and gradients are kept at steps 0 and 1, at the last step and every k-th step (0:
  // only those three).
  std::int64_t checkpoint_every = 0;
};

// Reads {"steps": N, "optimizer": "sgd", "lr": …, "momentum": …, "dampening": …,
// "weight_decay": …, "nesterov": …, "checkpoint_every": k} or, with "optimizer": "adam", "betas":
// [b1, b2] and "eps" in place of the SGD keys. Errors start with `where` and name the key: unknown
// keys, wrong types, steps outside [1, kMaxSteps], a non-finite or negative rate, Nesterov without
// momentum or with dampening (PyTorch refuses both), a key of the other optimizer, betas outside
// [0, 1), eps <= 0.
inline constexpr std::int64_t kMaxSteps = 100000;
Result<TrainConfig> read_train_config(const Json& j, const std::string& where);
Json to_json(const TrainConfig& c);

// The steps whose parameters and gradients are kept, ascending, without repeats.
std::vector<std::int64_t> checkpoint_steps(const TrainConfig& c);

}  // namespace validate::train
