#pragma once
// `--backend exec`: a user's program (Fortran, Rust, a TTNN script) run once per case and op (a
// training case: once per trajectory), on tensors written in *its* layouts (docs/runners.md,
// "exec"; docs/contract.md, "External programs").
//
// Per task, in task.work_dir (emptied first, so a file left by an earlier run is never read as
// this run's answer):
//   case.json           protocol "validate-exec/1": op, case, dtype, storage_dtype, params, format,
//                       and for every input and expected result its file, layout, shape in the
//                       layout's axis order, role and dtype;
//   <input>.bin|.npy    the inputs in their declared layouts (.npy: fortran_order for ":F" specs,
//                       shape in the layout's axis order, so numpy indexes with the layout's axes);
//   stdout.log, stderr.log  what the program printed.
// The command runs under /bin/sh -c with {dir} {case} {op} {dtype} expanded (shell-quoted), the
// VALIDATE_* variables set, stdin from /dev/null, in its own process group: on timeout the whole
// group is killed (SIGKILL), and whatever the program left running when it exited is killed too,
// so nothing writes into the work directory while the results are read. The program's working
// directory is the harness's, so relative paths in --cmd mean what they meant to the user.
//
// Expected back: output, loss (exactly one float32) and the gradients the layout file names for
// the op (a gradient it does not name is not asked for; grad_bias only with a bias). A non-zero
// exit, a signal, a timeout, a missing file, a wrong size / dtype / shape fail the task with a
// message that names the file and ends with the program's stderr; the next task runs regardless.
//
// Training cases (case.train) are served protocol 2, "validate-exec/2" (docs/runners.md): the
// program is started once per trajectory; steps/<s>/ holds the data inputs of each step s >= 1
// (OpTask::step_inputs) in the same layouts and file names, case.json adds "train",
// "checkpoints" and "step_inputs", the environment VALIDATE_PROTOCOL=2, VALIDATE_STEPS, the SGD
// hyper-parameters and VALIDATE_CHECKPOINTS; expected back besides the single-step results are
// train_loss (float32 [steps]) and step<k>_<param> / step<k>_grad_<param> in the layouts of
// <param> / grad_<param>. A program that writes none of them fails in one sentence. steps/ is
// capped at ExecOptions::max_step_input_bytes ((steps - 1) x one batch), checked before anything
// is written.
//
// Writes outside the work directory fail the task too, naming each file: the guarded trees (the
// run directory, i.e. RUN when the work directory is RUN/work/<dtype>/<case>/<op>, plus
// ExecOptions::guard_dirs, which `validate run` sets to the reference set) are snapshotted before
// and after the program (names, inodes, sizes, mtimes, ctimes; exec_process.hpp) minus this task's
// work directory. The program gets TMPDIR (and TMP, TEMP) = <work dir>/tmp, emptied before each
// run, so a well-behaved program's temporary files stay inside too.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "validate/layout/preset.hpp"
#include "validate/backends/runner.hpp"

namespace validate::runners {

struct ExecOptions {
  std::string cmd;         // run with /bin/sh -c after {dir} {case} {op} {dtype} expansion
  double timeout_s = 600;  // per task; the process group is SIGKILLed after this
  bool keep_work =
      false;  // false: delete the tensor files after a successful read (keep case.json, logs)
  // Trees the program must not write into besides the run directory (`validate run`: --ref).
  std::vector<std::string> guard_dirs;
  // Protocol 2 (training cases): the most bytes steps/ may hold, (steps - 1) × the data inputs of
  // one step; a case above it fails with the figures named (`--max-step-inputs-mb`).
  std::uint64_t max_step_input_bytes = std::uint64_t{4096} << 20;
};

// Longest --timeout accepted (one week): the deadline is kept in steady_clock nanoseconds.
inline constexpr double kMaxTimeoutSeconds = 7 * 24 * 3600.0;

std::unique_ptr<Runner> make_exec_runner(const ExecOptions& opt, const layout::LayoutSet& layouts);

// Error when a placeholder stands inside single or double quotes in `cmd` ('{dir}', "x/{dir}"):
// validate quotes each value itself, and quoting it again lets a path with $(...) run.
Status check_placeholders_unquoted(const std::string& cmd);

// The command line for one task: every {dir} {case} {op} {dtype} replaced by the value in single
// quotes ("it's" -> 'it'\''s'); other braces are left alone.
std::string expand_command(const std::string& cmd, const std::string& dir,
                           const std::string& case_name, const std::string& op,
                           const std::string& dtype);

}  // namespace validate::runners
