#pragma once
// The exec runner's parts (docs/runners.md "exec"), shared by its files:
//   exec_runner.cpp   the runner: plan a task's files, prepare its work directory, run_one
//   exec_inputs.cpp   what the program reads: case.json, the inputs, a training case's step inputs
//   exec_program.cpp  running it: its environment, the guarded snapshots, its work directory kept
// Internal to the exec backend.
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "exec_process.hpp"
#include "exec_result_file.hpp"
#include "validate/cases/algorithm.hpp"
#include "validate/core/json_io.hpp"
#include "validate/layout/convert.hpp"
#include "validate/ops/op.hpp"
#include "validate/backends/exec_runner.hpp"

namespace validate::runners::exec {

inline constexpr const char* kProtocol = "validate-exec/1";
// Training cases (docs/training.md decision 3): the program is started once per trajectory.
inline constexpr const char* kProtocolTrain = "validate-exec/2";
inline constexpr const char* kStepsDir = "steps";    // steps/<s>/<data input>: the batch of step s >= 1
inline constexpr std::size_t kMaxProblemsListed = 8;  // result-file problems named in full in one message
inline constexpr std::size_t kTailBytes = 4096;      // of stderr kept for the message
inline constexpr std::size_t kMaxOutsideListed = 8;  // files written outside the work dir named in full
// A program that does not do a task says so by writing this file (its first line: why) and
// exiting 0; the task is then `unsupported`, not an error (docs/runners.md, "Not supported").
inline constexpr const char* kUnsupportedFile = "unsupported.txt";
inline constexpr std::size_t kMaxUnsupportedReason = 512;  // bytes of its first line kept

// Every variable of the protocol. They are dropped from the inherited environment before the
// task's own are added, so a conv2d task never sees a VALIDATE_M left over from an enclosing run.
const std::vector<std::string>& protocol_vars();
// Absolute, lexically normal, no trailing '/': the spelling snapshot_tree's paths and skips use.
std::string normal_dir(const std::string& p);
bool within(const std::string& p, const std::string& root);

// Which gradients the layout file names, per op. LayoutSet gives every tensor of an op the file
// names a spec (the file's, else its base preset's), so it cannot tell a gradient the program
// writes from one the base filled in; the file can. nullopt: a preset or an in-memory set, which
// declares every tensor it holds.
using Declared = std::map<std::string, std::set<std::string>, std::less<>>;
std::optional<Declared> declared_in_file(const layout::LayoutSet& set);
// The layout file's "algorithms" (exec_algorithms.cpp): op -> tensor -> algorithm; an error names
// the file and the entry (an unknown op, tensor or algorithm, with a did-you-mean).
using DeclaredAlgorithms = std::map<std::string, std::map<std::string, cases::Algorithm>, std::less<>>;
Result<DeclaredAlgorithms> algorithms_in_file(const layout::LayoutSet& set);
std::map<std::string, std::string> algorithms_for(const DeclaredAlgorithms& d, const std::string& op,
                                                  const ops::OpParams& p);

// The task's op instance: the run driver hands a runner only the case's own ops.
const ops::OpParams& params_of(const OpTask& task);
// The op's parameters as case.json "params" and as VALIDATE_* environment variables (for
// programs without a JSON parser): the op's own (harness/ops/<op>/<op>.cpp); docs/runners.md
// lists them.
Json op_params(const OpTask& task);
std::vector<std::pair<const char*, std::int64_t>> op_env(const OpTask& task);
// A failure message for a program that did not exit cleanly; "" when it did.
std::string exit_failure(const ProcessResult& pr, double timeout_s);

// One task's files in its work directory: what the program reads and what it must write.
struct TaskFiles {
  std::string dir, tmp;  // the work directory (absolute, normal) and its scratch tmp/
  bool npy_format = false;
  struct stat dir_before {};  // the work directory before the program ran: it must stay that one
  std::vector<Expected> inputs, results;
  // Gradients the layout file does not name, in the spec its base preset gives them: not asked
  // for, but read and checked when the program writes them anyway (docs/runners.md, step 8).
  std::vector<Expected> unnamed;
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

  Status prepare() override;

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

  // The results the layout file does not ask for (a forward-only program leaves the gradients
  // out). Recorded in the op's info so compare says "not requested", not "not run"; one the
  // program writes anyway is read after all and taken off the list (read_unnamed).
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
  void read_unnamed(const TaskFiles& f, OpResult& r, std::vector<std::string>& problems) const;

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
  DeclaredAlgorithms algorithms_;  // read by prepare()
};

}  // namespace validate::runners::exec
