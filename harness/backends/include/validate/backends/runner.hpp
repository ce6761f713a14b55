#pragma once
// One interface for every backend (torch, oracle, exec, cudnn). A runner receives one case and
// op with its inputs in canonical layout (exactly the reference's bytes), feeds them to its stack
// in the layouts it was asked for, and hands back what it produced, converted to canonical layout.
// Outcomes are data, never exceptions: one failing case never stops the others.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "validate/cases/case.hpp"
#include "validate/cases/run_record.hpp"
#include "validate/core/result.hpp"
#include "validate/core/tensor.hpp"

namespace validate::runners {

// The outcome of one op as the run records it (cases/run_record.hpp).
using RunOutcome = cases::Outcome;
using cases::outcome_name;

struct OpTask {
  const cases::Case* c = nullptr;
  cases::Op op = cases::Op::conv2d;
  // Canonical inputs as stored in the reference (float32 storage for float32/bfloat16 cases,
  // float16 for float16): "input", "weight", "bias", "target" or "A", "B", "target".
  std::map<std::string, const Tensor*> inputs;
  std::string work_dir;  // a scratch directory the runner may use (exec writes its files here)
  std::string run_dir;   // the run directory being written (a program must leave it alone); "" outside `run`
  // A training case (c->train, docs/training.md): the data inputs of step s >= 1 ("input"/"A" and
  // "target", canonical, storage dtype), drawn from the set's seed exactly as generate drew them.
  // Set by `run` for training cases; a runner that trains needs nothing else to reproduce them.
  std::function<std::map<std::string, Tensor>(std::int64_t step)> step_inputs;
};

struct OpResult {
  RunOutcome outcome = RunOutcome::ok;
  std::string message;  // why it failed or was skipped; the program's stderr for exec
  // Canonical-layout results in the reference's storage dtype: "output", "loss" (0-d float32),
  // grads; for a training case also "train_loss" (float32, [steps]) and the checkpoint tensors
  // (train/tensor_names.hpp). A runner lists only what it computed.
  std::map<std::string, Tensor> outputs;
  // What other components act on (not requested, --repeat determinism, how tensors reached the
  // backend), as fields; `info` is backend detail for people: layouts used, algorithms, timings.
  cases::RunnerNotes notes;
  nlohmann::json info = nlohmann::json::object();
  std::string variant;  // e.g. a cuDNN algorithm combination; "" for the single default variant
};

class Runner {
 public:
  virtual ~Runner() = default;
  virtual std::string name() const = 0;
  // Backend, device, library versions, math mode, layouts: written into run_info.json.
  virtual nlohmann::json info() const = 0;
  // Prepare once (open the device, check the program exists). A failure here ends the run, exit 2.
  virtual Status prepare() { return Status::ok(); }
  // One case and op. Runners that explore variants (cuDNN --algo all) return several results.
  virtual std::vector<OpResult> run(const OpTask& task) = 0;
};

}  // namespace validate::runners
