// --backend exec: the user's own program, once per case and op
// (exec_runner.cpp and the exec_*.cpp beside it).
#include <cstdint>
#include <cstdlib>

#include "validate/backends/registry.hpp"
#include "validate/backends/exec_runner.hpp"

namespace validate::backends {

namespace {

Result<std::unique_ptr<runners::Runner>> make_exec(const BackendRequest& req) {
  runners::ExecOptions exec;
  exec.cmd = req.value("--cmd");
  if (exec.cmd.empty()) return Error{"--backend exec needs --cmd 'PROGRAM {dir}'"};
  const std::string& t = req.value("--timeout");
  char* end = nullptr;
  exec.timeout_s = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0') return Error{"--timeout '" + t + "' is not a number of seconds"};
  // its range (> 0, at most a week) is checked by the runner's prepare()
  exec.keep_work = req.value("--keep-work") == "1";
  // Protocol 2 (training cases): the cap on the batches written to steps/, in MiB.
  if (const std::string& cap = req.value("--max-step-inputs-mb"); !cap.empty()) {  // "": the default
    end = nullptr;
    const double mb = std::strtod(cap.c_str(), &end);
    if (*end != '\0' || !(mb >= 0) || !(mb <= 1 << 30))
      return Error{"--max-step-inputs-mb '" + cap + "' is not a number of MiB between 0 and 2^30"};
    exec.max_step_input_bytes = static_cast<std::uint64_t>(mb * (1 << 20));
  }
  exec.guard_dirs = {req.ref};  // a program that writes into the reference set fails its case
  return runners::make_exec_runner(exec, *req.layouts);
}

}  // namespace

Backend backend_exec() {
  Backend b;
  b.name = "exec";
  b.description = "your own program, run once per case and op on files in its declared layouts";
  b.options = {
      {"--cmd", "Command run per case and op; {dir} {case} {op} {dtype} are expanded", "", false},
      {"--timeout", "Seconds before the program is killed", "600", false, "FLOAT"},
      {"--keep-work", "Keep the inputs written for the program in RUN/work", "0", true},
      {"--max-step-inputs-mb", "Training cases: cap on the per-step batches written to steps/ (MiB)", "4096", false,
       "FLOAT"},
  };
  b.make = make_exec;
  return b;
}

}  // namespace validate::backends
