// The exec runner: docs/runners.md "exec". Writes a task's inputs in the layouts of the
// layout file, runs the user's command, reads the results back and converts them to canonical.
#include "validate/backends/exec_runner.hpp"

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

#include "exec_runner_parts.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/json_io.hpp"
#include "validate/core/mapped_file.hpp"
#include "validate/core/no_links.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/shell_quote.hpp"
#include "validate/core/tree.hpp"
#include "validate/layout/convert.hpp"
#include "validate/ops/registry.hpp"
#include "validate/backends/interrupt.hpp"
#include "validate/train/schedule.hpp"
#include "validate/train/tensor_names.hpp"

namespace validate::runners {

namespace exec {

namespace stdfs = std::filesystem;

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
      "VALIDATE_NCHECKPOINTS", "VALIDATE_STEPS_DIR", "VALIDATE_BETA1", "VALIDATE_BETA2", "VALIDATE_EPS"};
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

// The program's "not supported" answer: nullopt when it left no unsupported.txt, else the reason
// (its first line, control bytes shown as '?', "(no reason given)" when empty). A non-regular
// file in its place (a FIFO would block the read) is an error.
Result<std::optional<std::string>> unsupported_reason(const std::string& dir) {
  const std::string path = dir + "/" + kUnsupportedFile;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return std::optional<std::string>{};
  if (!S_ISREG(st.st_mode))
    return Error{fmt::format("{}: not a regular file (the program's \"not supported\" answer must be a text file)",
                             kUnsupportedFile)};
  std::ifstream f(path, std::ios::binary);
  std::string line(kMaxUnsupportedReason, '\0');
  f.read(line.data(), static_cast<std::streamsize>(line.size()));
  line.resize(static_cast<std::size_t>(std::max<std::streamsize>(f.gcount(), 0)));
  line = line.substr(0, line.find_first_of("\r\n"));
  const auto blank = [](char c) { return c == ' ' || c == '\t'; };
  while (!line.empty() && blank(line.back())) line.pop_back();
  while (!line.empty() && blank(line.front())) line.erase(0, 1);
  for (char& c : line)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return std::optional<std::string>{line.empty() ? "(no reason given)" : line};
}

Status ExecRunner::prepare() {
  if (opt_.cmd.empty()) return Error{"--backend exec needs --cmd 'PROGRAM {dir}'"};
  // Past a week the deadline arithmetic overflowed (1e10 s killed every program at once).
  if (!(opt_.timeout_s > 0) || !(opt_.timeout_s <= kMaxTimeoutSeconds))
    return Error{fmt::format("--timeout {} must be a number of seconds > 0 and <= {:g} (one week)",
                             opt_.timeout_s, kMaxTimeoutSeconds)};
  VALIDATE_TRY(check_placeholders_unquoted(opt_.cmd));
  if (::access("/bin/sh", X_OK) != 0)
    return Error{"--backend exec runs --cmd with /bin/sh, which is not executable here"};
  auto algorithms = algorithms_in_file(layouts_);
  if (!algorithms) return algorithms.status();
  algorithms_ = std::move(*algorithms);
  return Status::ok();
}

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
  r.notes.algorithms = algorithms_for(algorithms_, op, params_of(task));
  if (!run.changed.empty()) r.info["written_outside"] = run.changed;
  if (!run.stderr_tail.empty()) r.info["stderr_tail"] = run.stderr_tail;

  if (!run.pr.spawn_error.empty()) return fail(run.pr.spawn_error);
  if (run.pr.interrupted)
    return fail(run.explain(fmt::format(
        "interrupted: validate received {} and forwarded it to the program's process group{}",
        exec::signal_description(run.pr.interrupted),
        run.pr.exit_code >= 0 || run.pr.signal ? "" : fmt::format(", which was killed after {:g} s", kInterruptGraceSeconds))));
  if (!run.pr.escaped.empty()) {
    // A detached descendant kept writing into the run directory after the program exited, and
    // the next, innocent task was blamed; it is this task's, so this task fails.
    std::string who;
    for (std::size_t i = 0; i < run.pr.escaped.size() && i < kMaxOutsideListed; ++i) who += (i ? ", " : "") + run.pr.escaped[i];
    return fail(run.explain(fmt::format(
        "the program exited but left {} process(es) running outside its process group (setsid or a daemon): {}; "
        "validate killed them — a program must wait for every process it starts",
        run.pr.escaped.size(), who)));
  }
  if (Status st = check_work_dir_kept(files); !st) return fail(run.explain(st.message()));
  if (const std::string why = exit_failure(run.pr, opt_.timeout_s); !why.empty()) return fail(run.explain(why));

  auto cleanup = [&] {
    if (opt_.keep_work) return;
    std::error_code ec;
    for (const auto* group : {&files.inputs, &files.results, &files.unnamed})
      for (const auto& e : *group) stdfs::remove(files.dir + "/" + e.file, ec);
    (void)fs::remove_tree(files.dir + "/" + kStepsDir);
    (void)fs::remove_tree(files.tmp);  // a leftover scratch file is not a failure of the case
  };
  // "I do not do this": an outcome like the cuDNN runner's unsupported cases, so the run's other
  // tasks decide its exit status and compare lists the task as unsupported (a failure only under
  // --require-all). Writing outside the work directory still fails the task.
  auto unsupported = unsupported_reason(files.dir);
  if (!unsupported) return fail(run.explain(unsupported.message()));
  if (*unsupported) {
    if (!run.outside.empty()) return fail(run.explain("it answered \"not supported\": " + **unsupported));
    r.outcome = RunOutcome::unsupported;
    r.message = "the program does not support this task: " + **unsupported + " (" + kUnsupportedFile + ")";
    r.info["unsupported"] = **unsupported;
    r.notes.not_requested.reset();  // nothing was asked of a program that does not do the task
    return cleanup();
  }

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
  read_unnamed(files, r, problems);
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
    r.notes.unnamed_results.clear();
    if (problems.empty()) return fail(run.explain("its results are not used"));
    // A training case has a file per checkpoint tensor: the first few problems and the count.
    std::string listed;
    for (std::size_t i = 0; i < problems.size() && i < kMaxProblemsListed; ++i)
      listed += (i ? "; " : "") + problems[i];
    if (problems.size() > kMaxProblemsListed)
      listed += fmt::format("; and {} more", problems.size() - kMaxProblemsListed);
    return fail(run.explain(listed));
  }
  cleanup();
}

// A gradient the program wrote although its layout file does not name it: the file's base preset
// gives it a spec (docs/layouts.md), so it is read in that spec and checked like a requested result.
// Ignoring it would leave a gradient the program computed unchecked while the report says "not
// requested". One that cannot be read in that spec, or that is written in the other format, fails
// the task like any bad result.
void ExecRunner::read_unnamed(const TaskFiles& f, OpResult& r, std::vector<std::string>& problems) const {
  const auto present = [&](const std::string& file) {
    struct stat st {};
    return ::lstat((f.dir + "/" + file).c_str(), &st) == 0;
  };
  const std::string why = "the layout file does not name it, so it is read in the layout its base preset gives";
  for (const auto& e : f.unnamed) {
    const std::string other = e.info.name + (f.npy_format ? ".bin" : ".npy");
    if (!present(e.file)) {
      if (present(other))
        problems.push_back(fmt::format("{}: written, but the layout file's format is \"{}\": expected {} "
                                       "({}, {})",
                                       other, layouts_.format, e.file, describe(e), why));
      continue;
    }
    auto t = read_result(f.dir, e, f.npy_format);
    if (!t) {
      problems.push_back(t.message() + " (" + why + ")");
      continue;
    }
    r.outputs.emplace(e.info.name, std::move(*t));
    r.notes.unnamed_results[e.info.name] = layout::to_string(e.spec);
    if (r.notes.not_requested) {
      auto& left_out = *r.notes.not_requested;
      left_out.erase(std::remove(left_out.begin(), left_out.end(), e.info.name), left_out.end());
    }
  }
}

TaskFiles ExecRunner::plan_files(const OpTask& task) const {
  const cases::Case& c = *task.c;
  TaskFiles f;
  f.dir = normal_dir(task.work_dir);
  f.tmp = f.dir + "/tmp";
  f.npy_format = layouts_.format == "npy";
  const std::string ext = f.npy_format ? ".npy" : ".bin";
  const std::string op = cases::op_name(task.op);
  const layout::TensorSpecs& specs = layouts_.ops.find(op)->second;
  for (const auto& t : c.tensors(task.op)) {
    // A checkpoint tensor (step5_weight, step5_grad_weight) is held in its parameter's or
    // gradient's layout: the program hands back what it holds, as it does at step 0.
    std::string layout_name = t.name;
    if (t.role == cases::Role::checkpoint)
      if (auto cp = train::parse_checkpoint_tensor(t.name)) layout_name = cp->tensor;
    auto it = specs.find(layout_name);
    Expected e{t, it != specs.end() ? it->second : layout::canonical_spec(t.canonical_axes), c.storage(t),
               t.name + ext};
    if (t.role == cases::Role::input) {
      if (c.train && !t.parameter) f.step_inputs.push_back(e);
      f.inputs.push_back(std::move(e));
    } else if (wants(op, t)) {
      f.results.push_back(std::move(e));
    } else {
      f.unnamed.push_back(std::move(e));
    }
  }
  if (c.train) {
    f.train = true;
    f.checkpoints = train::checkpoint_steps(*c.train);
  }
  return f;
}

Status ExecRunner::prepare_work_dir(const OpTask& task, TaskFiles& f) const {
  // Not through a link an earlier task's program left below the run directory (no_links.hpp).
  if (!task.run_dir.empty()) VALIDATE_TRY(fs::refuse_links_below(normal_dir(task.run_dir), f.dir));
  VALIDATE_TRY(fs::make_dirs(f.dir));
  if (::lstat(f.dir.c_str(), &f.dir_before) != 0 || !S_ISDIR(f.dir_before.st_mode))
    return Error{"exec: work directory " + f.dir + " is not a directory"};
  // Files an earlier run left here must never be read as this run's results.
  std::error_code ec;
  for (const auto& t : task.c->tensors(task.op))
    for (const char* x : {".bin", ".npy"}) stdfs::remove(f.dir + "/" + t.name + x, ec);
  for (const char* name : {"case.json", "stdout.log", "stderr.log", kUnsupportedFile}) stdfs::remove(f.dir + "/" + name, ec);
  VALIDATE_TRY(fs::remove_tree(f.dir + "/" + kStepsDir));  // an earlier run's batches (or a longer trajectory's)
  VALIDATE_TRY(fs::remove_tree(f.tmp));
  return fs::make_dirs(f.tmp);
}

}  // namespace exec

std::unique_ptr<Runner> make_exec_runner(const ExecOptions& opt, const layout::LayoutSet& layouts) {
  return std::make_unique<exec::ExecRunner>(opt, layouts);
}

}  // namespace validate::runners
