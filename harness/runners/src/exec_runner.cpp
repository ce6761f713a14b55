// The exec runner: DESIGN.md "External programs". Writes a task's inputs in the layouts of the
// layout file, runs the user's command, reads the results back and converts them to canonical.
#include "validate/runners/exec_runner.hpp"

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

#include "exec_process.hpp"
#include "exec_result_file.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/mapped_file.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/shell_quote.hpp"
#include "validate/core/tree.hpp"
#include "validate/layout/convert.hpp"
#include "validate/ops/registry.hpp"
#include "validate/runners/interrupt.hpp"
#include "validate/train/schedule.hpp"
#include "validate/train/tensor_names.hpp"

extern char** environ;

namespace validate::runners {

namespace {

namespace stdfs = std::filesystem;
using exec::Expected;
using exec::read_result;

constexpr const char* kProtocol = "validate-exec/1";
// Training cases (docs/training.md decision 3): the program is started once per trajectory.
constexpr const char* kProtocolTrain = "validate-exec/2";
constexpr const char* kStepsDir = "steps";    // steps/<s>/<data input>: the batch of step s >= 1
constexpr std::size_t kMaxProblemsListed = 8;  // result-file problems named in full in one message
constexpr std::size_t kTailBytes = 4096;      // of stderr kept for the message
constexpr std::size_t kMaxOutsideListed = 8;  // files written outside the work dir named in full

// Every variable of the protocol. They are dropped from the inherited environment before the
// task's own are added, so a conv2d task never sees a VALIDATE_M left over from an enclosing run.
const std::vector<std::string>& protocol_vars() {
  static const std::vector<std::string> v{
      "VALIDATE_OP",   "VALIDATE_CASE", "VALIDATE_DTYPE", "VALIDATE_DIR",    "VALIDATE_FORMAT",
      "VALIDATE_N",    "VALIDATE_C",    "VALIDATE_H",     "VALIDATE_W",      "VALIDATE_O",
      "VALIDATE_KH",   "VALIDATE_KW",   "VALIDATE_SH",    "VALIDATE_SW",     "VALIDATE_PH",
      "VALIDATE_PW",   "VALIDATE_DH",   "VALIDATE_DW",    "VALIDATE_GROUPS", "VALIDATE_HOUT",
      "VALIDATE_WOUT", "VALIDATE_BIAS", "VALIDATE_M",     "VALIDATE_K",      "VALIDATE_NCOLS",
      // protocol 2 (training cases); also dropped from a single-step task's environment, so a
      // program never sees a stale VALIDATE_PROTOCOL=2 and trains when it should not.
      "VALIDATE_OPH",  "VALIDATE_OPW",
      "VALIDATE_PROTOCOL", "VALIDATE_STEPS", "VALIDATE_OPTIMIZER", "VALIDATE_LR", "VALIDATE_MOMENTUM",
      "VALIDATE_DAMPENING", "VALIDATE_WEIGHT_DECAY", "VALIDATE_NESTEROV", "VALIDATE_CHECKPOINTS",
      "VALIDATE_NCHECKPOINTS", "VALIDATE_STEPS_DIR"};
  return v;
}

// Absolute, lexically normal, no trailing '/': the spelling snapshot_tree's paths and skips use.
std::string normal_dir(const std::string& p) {
  std::error_code ec;
  std::string s = stdfs::absolute(p, ec).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

bool within(const std::string& p, const std::string& root) {
  return p == root ||
         (p.size() > root.size() && p.compare(0, root.size(), root) == 0 && p[root.size()] == '/');
}

// Which gradients the layout file names, per op. LayoutSet gives every tensor of an op the file
// names a spec (the file's, else its base preset's), so it cannot tell a gradient the program
// writes from one the base filled in; the file can. nullopt: a preset or an in-memory set, which
// declares every tensor it holds.
using Declared = std::map<std::string, std::set<std::string>, std::less<>>;
std::optional<Declared> declared_in_file(const layout::LayoutSet& set) {
  for (const auto& p : layout::preset_names())
    if (set.name == p) return std::nullopt;
  std::error_code ec;
  if (set.name.empty() || !stdfs::is_regular_file(set.name, ec)) return std::nullopt;
  auto doc = read_json(set.name);
  if (!doc || !doc->is_object()) return std::nullopt;
  Declared d;
  for (const auto& [op, tensors] : doc->items()) {
    if (!tensors.is_object() || !set.has_op(op)) continue;
    auto& names = d[op];
    for (const auto& [t, spec] : tensors.items()) names.insert(t);
  }
  return d;
}

// One task's files in its work directory: what the program reads and what it must write.
struct TaskFiles {
  std::string dir, tmp;  // the work directory (absolute, normal) and its scratch tmp/
  bool npy_format = false;
  struct stat dir_before {};  // the work directory before the program ran: it must stay that one
  std::vector<Expected> inputs, results;
  // Protocol 2 (a training case): the checkpoint steps and the data inputs (not the parameters)
  // written again for every step s >= 1 under steps/<s>/, with the same file names.
  bool train = false;
  std::vector<std::int64_t> checkpoints;
  std::vector<Expected> step_inputs;
  Json layouts_used() const {
    Json j = Json::object();
    for (const auto* group : {&inputs, &results})
      for (const auto& e : *group) j[e.info.name] = layout::to_string(e.spec);
    return j;
  }
};

// What running the program did: its exit, anything it changed outside its work directory, and
// the tail of its stderr.
struct ProgramRun {
  std::string dir;
  exec::ProcessResult pr;
  std::vector<std::string> changed;  // guarded files it wrote, removed or replaced
  std::string outside;               // "" or "the program wrote outside its work directory: ..."
  std::string stderr_tail;
  // A failure message with the context a user needs: a write outside the work directory first
  // (it may have damaged something else: the reference set, another case's results), then the
  // program's stderr (or stdout when stderr is empty).
  std::string explain(const std::string& what) const {
    std::string m = (outside.empty() ? what : outside + "; " + what) + " (work dir " + dir + ")";
    if (!stderr_tail.empty()) return m + "; stderr: " + stderr_tail;
    const std::string out_tail = exec::file_tail(dir + "/stdout.log", kTailBytes);
    return m + (out_tail.empty() ? "; nothing on stderr or stdout" : "; nothing on stderr; stdout: " + out_tail);
  }
};

class ExecRunner final : public Runner {
 public:
  ExecRunner(ExecOptions opt, layout::LayoutSet layouts)
      : opt_(std::move(opt)), layouts_(std::move(layouts)), declared_(declared_in_file(layouts_)) {
    for (const auto& g : opt_.guard_dirs)
      if (!g.empty()) guard_.push_back(normal_dir(g));
  }

  std::string name() const override { return "exec"; }

  nlohmann::json info() const override {
    return {{"backend", "exec"},           {"device", "external program"},
            {"protocol", kProtocol},       {"protocol_training", kProtocolTrain},
            {"max_step_input_bytes", opt_.max_step_input_bytes},  {"cmd", opt_.cmd},
            {"timeout_s", opt_.timeout_s}, {"keep_work", opt_.keep_work},
            {"shell", "/bin/sh -c"},       {"layout", layout::to_json(layouts_)},
            {"guard_dirs", guard_}};
  }

  Status prepare() override {
    if (opt_.cmd.empty()) return Error{"--backend exec needs --cmd 'PROGRAM {dir}'"};
    // Past a week the deadline arithmetic overflowed (1e10 s killed every program at once).
    if (!(opt_.timeout_s > 0) || !(opt_.timeout_s <= kMaxTimeoutSeconds))
      return Error{fmt::format("--timeout {} must be a number of seconds > 0 and <= {:g} (one week)",
                               opt_.timeout_s, kMaxTimeoutSeconds)};
    VALIDATE_TRY(check_placeholders_unquoted(opt_.cmd));
    if (::access("/bin/sh", X_OK) != 0)
      return Error{"--backend exec runs --cmd with /bin/sh, which is not executable here"};
    return Status::ok();
  }

  std::vector<OpResult> run(const OpTask& task) override {
    std::vector<OpResult> out(1);
    run_one(task, out[0]);
    return out;
  }

 private:
  bool wants(const std::string& op, const cases::TensorInfo& t) const {
    if (t.role != cases::Role::grad || !declared_) return true;
    auto it = declared_->find(op);
    return it != declared_->end() && it->second.count(t.name) > 0;
  }

  // Issue 12: the results the layout file does not ask for (a forward-only program leaves the
  // gradients out). Recorded in the op's info so compare says "not requested", not "not run".
  std::vector<std::string> not_requested(const std::string& op, const std::vector<cases::TensorInfo>& tensors) const {
    std::vector<std::string> out;
    for (const auto& t : tensors)
      if (t.role != cases::Role::input && !wants(op, t)) out.push_back(t.name);
    return out;
  }

  // One task, in named steps: plan the files, prepare the work directory, write case.json and
  // the inputs, run the program between snapshots, check how it ended, read its results.
  void run_one(const OpTask& task, OpResult& r) const;
  TaskFiles plan_files(const OpTask& task) const;
  Status prepare_work_dir(const OpTask& task, TaskFiles& f) const;
  Status write_case_json(const OpTask& task, const TaskFiles& f) const;
  Status write_inputs(const OpTask& task, const TaskFiles& f) const;
  Status check_step_inputs(const OpTask& task, const TaskFiles& f) const;
  Status write_step_inputs(const OpTask& task, const TaskFiles& f) const;
  std::vector<std::string> program_env(const OpTask& task, const TaskFiles& f) const;
  ProgramRun run_program(const OpTask& task, const TaskFiles& f, const std::string& cmd) const;
  static Status check_work_dir_kept(const TaskFiles& f);

  // The trees a task's program must leave alone: the run directory the driver passes and the
  // guard dirs; a tree inside another is covered by it, one inside the work dir `dir` belongs to
  // the program (the driver's work dirs lie inside the run directory).
  std::vector<std::string> guarded_roots(const OpTask& task, const std::string& dir) const {
    std::vector<std::string> c = guard_;
    if (!task.run_dir.empty()) c.push_back(normal_dir(task.run_dir));
    std::sort(c.begin(), c.end());
    std::vector<std::string> roots;
    for (const auto& x : c) {
      if (within(x, dir)) continue;
      bool covered = false;
      for (const auto& r : roots) covered = covered || within(x, r);
      if (!covered) roots.push_back(x);
    }
    return roots;
  }

  ExecOptions opt_;
  std::vector<std::string> guard_;  // opt_.guard_dirs, normalised
  layout::LayoutSet layouts_;
  std::optional<Declared> declared_;
};

// The task's op instance: the run driver hands a runner only the case's own ops.
const ops::OpParams& params_of(const OpTask& task) {
  const cases::OpInstance* inst = task.c->find(task.op);
  assert(inst && "run_driver hands out only the case's own ops");
  return inst->params;
}

// The op's parameters as case.json "params" and as VALIDATE_* environment variables (for
// programs without a JSON parser): the op's own (harness/ops/<op>/<op>.cpp); docs/runners.md
// lists them.
Json op_params(const OpTask& task) { return ops::find(task.op).exec_params(params_of(task)); }
std::vector<std::pair<const char*, std::int64_t>> op_env(const OpTask& task) {
  return ops::find(task.op).exec_env(params_of(task));
}

// A failure message for a program that did not exit cleanly; "" when it did.
std::string exit_failure(const exec::ProcessResult& pr, double timeout_s) {
  if (pr.timed_out)
    return fmt::format("timed out after {:g} s: the program's process group was killed (--timeout)", timeout_s);
  if (pr.signal) return "the program was killed by " + exec::signal_description(pr.signal);
  if (pr.exit_code == 0) return "";
  // The shell reports a command that a signal ended as status 128 + N (139: a segfault).
  // 126/127: the shell found the command but could not run it / did not find it.
  std::string how;
  if (pr.exit_code > 128 && pr.exit_code < 128 + 65)
    how = " (128 + " + std::to_string(pr.exit_code - 128) + ": a command it ran was killed by " +
          exec::signal_description(pr.exit_code - 128) + ")";
  else if (pr.exit_code == 127)
    how = " (127: the shell did not find the command)";
  else if (pr.exit_code == 126)
    how = " (126: the command is not executable)";
  return fmt::format("the program exited with status {}{}", pr.exit_code, how);
}

}  // namespace

void ExecRunner::run_one(const OpTask& task, OpResult& r) const {
  auto fail = [&](const std::string& m) {
    r.outcome = RunOutcome::error;
    r.message = m;
  };
  const std::string op = cases::op_name(task.op);
  if (!layouts_.has_op(op)) {
    r.outcome = RunOutcome::skipped;
    r.message = "op not in the layout file";
    return;
  }
  if (task.work_dir.empty()) return fail("exec: no work directory for this task");
  TaskFiles files = plan_files(task);
  // Before anything is written: a trajectory too large for steps/ leaves no half-written work dir.
  if (Status st = check_step_inputs(task, files); !st) return fail(st.message());
  if (Status st = prepare_work_dir(task, files); !st) return fail(st.message());
  if (Status st = write_case_json(task, files); !st) return fail(st.message());
  if (Status st = write_inputs(task, files); !st) return fail(st.message());
  if (Status st = write_step_inputs(task, files); !st) return fail(st.message());

  const std::string cmd =
      expand_command(opt_.cmd, files.dir, task.c->name, op, std::string(dtype_name(task.c->dtype)));
  const ProgramRun run = run_program(task, files, cmd);
  r.info = {{"command", cmd},          {"work_dir", files.dir}, {"format", layouts_.format},
            {"layouts", files.layouts_used()}, {"program_s", run.pr.seconds}, {"exit_status", run.pr.exit_code},
            {"protocol", files.train ? kProtocolTrain : kProtocol}};
  r.notes.not_requested = not_requested(op, task.c->tensors(task.op));
  if (!run.changed.empty()) r.info["written_outside"] = run.changed;
  if (!run.stderr_tail.empty()) r.info["stderr_tail"] = run.stderr_tail;

  if (!run.pr.spawn_error.empty()) return fail(run.pr.spawn_error);
  if (run.pr.interrupted)
    return fail(run.explain(fmt::format(
        "interrupted: validate received {} and forwarded it to the program's process group{}",
        exec::signal_description(run.pr.interrupted),
        run.pr.exit_code >= 0 || run.pr.signal ? "" : fmt::format(", which was killed after {:g} s", kInterruptGraceSeconds))));
  if (Status st = check_work_dir_kept(files); !st) return fail(run.explain(st.message()));
  if (const std::string why = exit_failure(run.pr, opt_.timeout_s); !why.empty()) return fail(run.explain(why));

  std::vector<std::string> problems;
  std::vector<std::string> trajectory_missing;  // train_loss and checkpoint files not written
  std::size_t trajectory_files = 0;
  for (const auto& e : files.results) {
    const bool trajectory = e.info.role == cases::Role::loss_curve || e.info.role == cases::Role::checkpoint;
    trajectory_files += trajectory;
    auto t = read_result(files.dir, e, files.npy_format);
    if (!t) {
      if (trajectory && t.message().find(": missing") != std::string::npos)
        trajectory_missing.push_back(e.file);
      else
        problems.push_back(t.message());
      continue;
    }
    r.outputs.emplace(e.info.name, std::move(*t));
  }
  if (!trajectory_missing.empty()) {
    // A program that ignores protocol 2 writes none of them: one sentence says so, instead of a
    // "missing" line per checkpoint file.
    if (trajectory_missing.size() == trajectory_files)
      problems.insert(problems.begin(),
                      fmt::format("a training case ({} steps): the program wrote none of its trajectory ({} files: {}, {}, "
                                  "...) — it must run every step (case.json \"protocol\": \"{}\", VALIDATE_PROTOCOL=2; "
                                  "docs/runners.md) and write the loss curve and the checkpoints",
                                  task.c->train->steps, trajectory_files, trajectory_missing[0],
                                  trajectory_missing.size() > 1 ? trajectory_missing[1] : "", kProtocolTrain));
    else
      for (const auto& name : trajectory_missing) problems.push_back(name + ": missing (the program did not write it)");
  }
  if (!problems.empty() || !run.outside.empty()) {
    r.outputs.clear();
    if (problems.empty()) return fail(run.explain("its results are not used"));
    // A training case has a file per checkpoint tensor: the first few problems and the count.
    std::string listed;
    for (std::size_t i = 0; i < problems.size() && i < kMaxProblemsListed; ++i)
      listed += (i ? "; " : "") + problems[i];
    if (problems.size() > kMaxProblemsListed)
      listed += fmt::format("; and {} more", problems.size() - kMaxProblemsListed);
    return fail(run.explain(listed));
  }
  if (!opt_.keep_work) {
    std::error_code ec;
    for (const auto* group : {&files.inputs, &files.results})
      for (const auto& e : *group) stdfs::remove(files.dir + "/" + e.file, ec);
    (void)fs::remove_tree(files.dir + "/" + kStepsDir);
    (void)fs::remove_tree(files.tmp);  // a leftover scratch file is not a failure of the case
  }
}

TaskFiles ExecRunner::plan_files(const OpTask& task) const {
  const cases::Case& c = *task.c;
  TaskFiles f;
  f.dir = normal_dir(task.work_dir);
  f.tmp = f.dir + "/tmp";
  f.npy_format = layouts_.format == "npy";
  const std::string ext = f.npy_format ? ".npy" : ".bin";
  const DType storage = storage_dtype(c.dtype);
  const std::string op = cases::op_name(task.op);
  const layout::TensorSpecs& specs = layouts_.ops.find(op)->second;
  for (const auto& t : c.tensors(task.op)) {
    // A checkpoint tensor (step5_weight, step5_grad_weight) is held in its parameter's or
    // gradient's layout: the program hands back what it holds, as it does at step 0.
    std::string layout_name = t.name;
    if (t.role == cases::Role::checkpoint)
      if (auto cp = train::parse_checkpoint_tensor(t.name)) layout_name = cp->tensor;
    auto it = specs.find(layout_name);
    const bool float32_always = t.role == cases::Role::loss || t.role == cases::Role::loss_curve;
    Expected e{t, it != specs.end() ? it->second : layout::canonical_spec(t.canonical_axes),
               float32_always ? DType::float32 : storage, t.name + ext};
    if (t.role == cases::Role::input) {
      if (c.train && !t.parameter) f.step_inputs.push_back(e);
      f.inputs.push_back(std::move(e));
    } else if (wants(op, t)) {
      f.results.push_back(std::move(e));
    }
  }
  if (c.train) {
    f.train = true;
    f.checkpoints = train::checkpoint_steps(*c.train);
  }
  return f;
}

Status ExecRunner::prepare_work_dir(const OpTask& task, TaskFiles& f) const {
  VALIDATE_TRY(fs::make_dirs(f.dir));
  if (::lstat(f.dir.c_str(), &f.dir_before) != 0 || !S_ISDIR(f.dir_before.st_mode))
    return Error{"exec: work directory " + f.dir + " is not a directory"};
  // Files an earlier run left here must never be read as this run's results.
  std::error_code ec;
  for (const auto& t : task.c->tensors(task.op))
    for (const char* x : {".bin", ".npy"}) stdfs::remove(f.dir + "/" + t.name + x, ec);
  for (const char* name : {"case.json", "stdout.log", "stderr.log"}) stdfs::remove(f.dir + "/" + name, ec);
  VALIDATE_TRY(fs::remove_tree(f.dir + "/" + kStepsDir));  // an earlier run's batches (or a longer trajectory's)
  VALIDATE_TRY(fs::remove_tree(f.tmp));
  return fs::make_dirs(f.tmp);
}

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

// The environment: the harness's own, less stale protocol variables, plus this task's.
std::vector<std::string> ExecRunner::program_env(const OpTask& task, const TaskFiles& f) const {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv(*e);
    const std::string key = kv.substr(0, kv.find('='));
    bool ours = key == "TMPDIR" || key == "TMP" || key == "TEMP";
    for (const auto& v : protocol_vars()) ours = ours || key == v;
    if (!ours) env.push_back(kv);
  }
  auto set = [&](const char* k, const auto& v) { env.push_back(fmt::format("{}={}", k, v)); };
  set("VALIDATE_OP", cases::op_name(task.op));
  set("VALIDATE_CASE", task.c->name);
  set("VALIDATE_DTYPE", dtype_name(task.c->dtype));
  set("VALIDATE_DIR", f.dir);
  set("VALIDATE_FORMAT", layouts_.format);
  // Its temporary files belong in its work directory, not in a /tmp shared with everything else.
  for (const char* k : {"TMPDIR", "TMP", "TEMP"}) set(k, f.tmp);
  for (const auto& [k, v] : op_env(task)) set(k, v);
  if (f.train) {
    // Protocol 2 for programs without a JSON parser: the schedule as case.json has it. Rates
    // with 17 significant digits, so a program that parses them as double and rounds to float
    // gets exactly the float the reference's optimizer used.
    const train::TrainConfig& t = *task.c->train;
    std::string cps;
    for (auto k : f.checkpoints) cps += (cps.empty() ? "" : " ") + std::to_string(k);
    set("VALIDATE_PROTOCOL", 2);
    set("VALIDATE_STEPS", t.steps);
    set("VALIDATE_OPTIMIZER", "sgd");
    set("VALIDATE_LR", fmt::format("{:.17g}", t.lr));
    set("VALIDATE_MOMENTUM", fmt::format("{:.17g}", t.momentum));
    set("VALIDATE_DAMPENING", fmt::format("{:.17g}", t.dampening));
    set("VALIDATE_WEIGHT_DECAY", fmt::format("{:.17g}", t.weight_decay));
    set("VALIDATE_NESTEROV", t.nesterov ? 1 : 0);
    set("VALIDATE_NCHECKPOINTS", f.checkpoints.size());
    set("VALIDATE_CHECKPOINTS", cps);
    set("VALIDATE_STEPS_DIR", f.dir + "/" + kStepsDir);
  }
  return env;
}

// Runs the program between snapshots of the guarded trees: anything it changed there is named.
ProgramRun ExecRunner::run_program(const OpTask& task, const TaskFiles& f, const std::string& cmd) const {
  const std::vector<std::string> roots = guarded_roots(task, f.dir);
  std::vector<exec::TreeSnapshot> before;
  for (const auto& root : roots) before.push_back(exec::snapshot_tree(root, {f.dir}));
  ProgramRun run;
  run.dir = f.dir;
  run.pr = exec::run_shell(cmd, program_env(task, f), f.dir + "/stdout.log", f.dir + "/stderr.log", opt_.timeout_s);
  for (std::size_t i = 0; i < roots.size(); ++i)
    for (auto& change : exec::tree_changes(before[i], exec::snapshot_tree(roots[i], {f.dir})))
      run.changed.push_back(std::move(change));
  if (!run.changed.empty()) {
    run.outside = "the program wrote outside its work directory: ";
    for (std::size_t i = 0; i < run.changed.size() && i < kMaxOutsideListed; ++i)
      run.outside += (i ? ", " : "") + run.changed[i];
    if (run.changed.size() > kMaxOutsideListed)
      run.outside += fmt::format(" and {} more", run.changed.size() - kMaxOutsideListed);
  }
  run.stderr_tail = exec::file_tail(f.dir + "/stderr.log", kTailBytes);
  return run;
}

// A program that replaced its work directory (by a symlink to elsewhere, say) would have the
// harness read and delete through it.
Status ExecRunner::check_work_dir_kept(const TaskFiles& f) {
  struct stat now {};
  if (::lstat(f.dir.c_str(), &now) != 0 || !S_ISDIR(now.st_mode) || now.st_ino != f.dir_before.st_ino ||
      now.st_dev != f.dir_before.st_dev)
    return Error{"the program removed or replaced its work directory " + f.dir};
  ::chmod(f.dir.c_str(), 0755);  // one it made unreadable (mode 000) is ours to read back
  return Status::ok();
}

std::unique_ptr<Runner> make_exec_runner(const ExecOptions& opt, const layout::LayoutSet& layouts) {
  return std::make_unique<ExecRunner>(opt, layouts);
}

}  // namespace validate::runners
