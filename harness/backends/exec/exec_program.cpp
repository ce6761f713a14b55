// Running the exec runner's program: its environment, the snapshots of the trees it must leave
// alone, and the check that it kept its work directory.
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

extern char** environ;

namespace validate::runners::exec {

namespace stdfs = std::filesystem;

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
    set("VALIDATE_OPTIMIZER", train::optimizer_name(t.optimizer));
    set("VALIDATE_LR", fmt::format("{:.17g}", t.lr));
    set("VALIDATE_MOMENTUM", fmt::format("{:.17g}", t.momentum));
    set("VALIDATE_DAMPENING", fmt::format("{:.17g}", t.dampening));
    set("VALIDATE_WEIGHT_DECAY", fmt::format("{:.17g}", t.weight_decay));
    set("VALIDATE_NESTEROV", t.nesterov ? 1 : 0);
    if (t.optimizer == train::Optimizer::adam) {
      set("VALIDATE_BETA1", fmt::format("{:.17g}", t.beta1));
      set("VALIDATE_BETA2", fmt::format("{:.17g}", t.beta2));
      set("VALIDATE_EPS", fmt::format("{:.17g}", t.eps));
    }
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
  // The program and everything it started have ended (run_shell kills and reaps them all), so
  // what is in the trees now stays as it is until the next task's program starts.
  const std::string run_root = task.run_dir.empty() ? std::string() : normal_dir(task.run_dir);
  std::vector<std::string> links;
  for (std::size_t i = 0; i < roots.size(); ++i) {
    const exec::TreeSnapshot after = exec::snapshot_tree(roots[i], {f.dir});
    for (auto& change : exec::tree_changes(before[i], after)) run.changed.push_back(std::move(change));
    // New links only: one an earlier program left inside its own work directory is its business
    // (validate never writes there again) and is not the next task's doing.
    for (const auto& [path, e] : after) {
      if (!e.link || run_root.empty() || !within(path, run_root)) continue;
      const auto was = before[i].find(path);
      if (was == before[i].end() || !was->second.link || was->second.ino != e.ino) links.push_back(path);
    }
  }
  // A symbolic link in the run directory, outside this task's work directory, would have the
  // next tasks' results, records and work directories written wherever it points (the reference
  // set: compare then compared a file with itself). It is this task's doing: named, and removed
  // (the link only, never what it points to) before anything else is written.
  for (const auto& path : links) {
    const bool removed = ::unlink(path.c_str()) == 0;
    run.changed.push_back(path + (removed ? " (a symbolic link: removed, nothing was written through it)"
                                          : " (a symbolic link that could not be removed: " +
                                                std::string(std::strerror(errno)) + ")"));
  }
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

}  // namespace validate::runners::exec
