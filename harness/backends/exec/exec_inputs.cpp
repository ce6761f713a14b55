// What the exec runner's program reads: case.json, the inputs in their layouts, and a training
// case's step inputs (protocol 2).
#include "exec_runner_parts.hpp"

#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cassert>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <fmt/format.h>
#include "validate/core/fs.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/mapped_file.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/shell_quote.hpp"
#include "validate/core/tree.hpp"
#include "validate/layout/convert.hpp"
#include "validate/ops/registry.hpp"
#include "validate/backends/interrupt.hpp"
#include "validate/train/schedule.hpp"
#include "validate/train/tensor_names.hpp"

namespace validate::runners::exec {

namespace stdfs = std::filesystem;

Status ExecRunner::write_case_json(const OpTask& task, const TaskFiles& f) const {
  const cases::Case& c = *task.c;
  Json tensors = Json::object();
  for (const auto* group : {&f.inputs, &f.results})
    for (const auto& e : *group)
      tensors[e.info.name] = {{"file", e.file},
                              {"layout", layout::to_string(e.spec)},
                              {"shape", layout::shape_in_layout(e.spec, e.info.canonical_axes, e.info.shape)},
                              {"role", cases::role_name(e.info.role)},
                              {"dtype", dtype_name(e.dtype)}};
  Json doc = {{"protocol", f.train ? kProtocolTrain : kProtocol},
              {"op", cases::op_name(task.op)},
              {"case", c.name},
              {"dtype", dtype_name(c.dtype)},
              {"storage_dtype", dtype_name(storage_dtype(c.dtype))},
              {"params", op_params(task)},
              {"format", layouts_.format},
              {"tensors", tensors}};
  if (f.train) {
    // Protocol 2: the schedule, the steps whose parameters and gradients come back, and where each
    // later step's batch lies (the same file names as step 0's, under steps/<s>/).
    Json step_tensors = Json::array();
    for (const auto& e : f.step_inputs) step_tensors.push_back(e.info.name);
    doc["train"] = train::to_json(*c.train);
    doc["checkpoints"] = f.checkpoints;
    doc["step_inputs"] = {{"dir", std::string(kStepsDir) + "/{step}"},
                          {"first_step", 1},
                          {"last_step", c.train->steps - 1},
                          {"tensors", step_tensors}};
  }
  return write_json(f.dir + "/case.json", doc);
}

// The inputs, in their layouts.
Status ExecRunner::write_inputs(const OpTask& task, const TaskFiles& f) const {
  for (const auto& e : f.inputs) {
    auto it = task.inputs.find(e.info.name);
    if (it == task.inputs.end() || !it->second) return Error{"exec: input '" + e.info.name + "' was not given"};
    const Tensor& x = *it->second;
    if (x.shape() != e.info.shape || x.dtype() != e.dtype)
      return Error{fmt::format("exec: input '{}' is {} {}, expected {} {}", e.info.name, dtype_name(x.dtype()),
                               shape_to_string(x.shape()), dtype_name(e.dtype), shape_to_string(e.info.shape))};
    const Tensor laid = layout::to_layout(x, e.info.canonical_axes, e.spec);
    const std::string header = f.npy_format ? npy::make_header(e.dtype, laid.shape(), e.spec.fortran) : std::string();
    VALIDATE_TRY(fs::write_atomic(f.dir + "/" + e.file, laid.bytes(), laid.nbytes(), header));
  }
  return Status::ok();
}

// Protocol 2: the data inputs of every step s >= 1 under steps/<s>/, in the same layouts and file
// names as step 0's (the parameters are given once: the program's optimizer owns them). Drawn one
// step at a time, so memory holds one batch; the total is capped before anything is written.
Status ExecRunner::check_step_inputs(const OpTask& task, const TaskFiles& f) const {
  if (!f.train || task.c->train->steps <= 1) return Status::ok();
  if (!task.step_inputs)
    return Error{"exec: a training case needs each step's inputs, and this task was given none (internal: "
                 "OpTask::step_inputs is not set)"};
  const std::int64_t steps = task.c->train->steps;
  std::uint64_t per_step = 0;
  for (const auto& e : f.step_inputs)
    per_step += static_cast<std::uint64_t>(shape_numel(e.info.shape)) * dtype_size(e.dtype);
  const std::uint64_t total = per_step * static_cast<std::uint64_t>(steps - 1);
  if (total > opt_.max_step_input_bytes)
    return Error{fmt::format(
        "exec: case {} trains {} steps and each batch is {} bytes, so steps/ would hold {} x {} = {} bytes "
        "(steps x input bytes), above the exec runner's cap of {} bytes ({:.6g} MiB, --max-step-inputs-mb); "
        "raise the cap or train fewer steps",
        task.c->name, steps, per_step, steps - 1, per_step, total, opt_.max_step_input_bytes,
        static_cast<double>(opt_.max_step_input_bytes) / (1 << 20))};
  return Status::ok();
}

Status ExecRunner::write_step_inputs(const OpTask& task, const TaskFiles& f) const {
  if (!f.train || task.c->train->steps <= 1) return Status::ok();
  const std::int64_t steps = task.c->train->steps;
  for (std::int64_t s = 1; s < steps; ++s) {
    const std::string dir = fmt::format("{}/{}/{}", f.dir, kStepsDir, s);
    VALIDATE_TRY(fs::make_dirs(dir));
    const std::map<std::string, Tensor> batch = task.step_inputs(s);
    for (const auto& e : f.step_inputs) {
      auto it = batch.find(e.info.name);
      if (it == batch.end()) return Error{fmt::format("exec: step {}'s input '{}' was not drawn", s, e.info.name)};
      const Tensor& x = it->second;
      if (x.shape() != e.info.shape || x.dtype() != e.dtype)
        return Error{fmt::format("exec: step {}'s input '{}' is {} {}, expected {} {}", s, e.info.name,
                                 dtype_name(x.dtype()), shape_to_string(x.shape()), dtype_name(e.dtype),
                                 shape_to_string(e.info.shape))};
      const Tensor laid = layout::to_layout(x, e.info.canonical_axes, e.spec);
      const std::string header = f.npy_format ? npy::make_header(e.dtype, laid.shape(), e.spec.fortran) : std::string();
      VALIDATE_TRY(fs::write_atomic(dir + "/" + e.file, laid.bytes(), laid.nbytes(), header));
    }
  }
  return Status::ok();
}

}  // namespace validate::runners::exec
