#include <iostream>

#include <fmt/format.h>

#include "commands.hpp"
#include "validate/layout/preset.hpp"
#include "validate/runners/exec_runner.hpp"
#include "validate/runners/interrupt.hpp"
#include "validate/runners/oracle_runner.hpp"
#include "validate/runners/run_driver.hpp"
#include "validate/runners/torch_runner.hpp"
#ifdef VALIDATE_HAVE_CUDNN_RUNNER
#include "validate/runners/cudnn_runner.hpp"
#endif

namespace validate::cli {

void register_run(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand("run", "Run the cases of a reference set through a backend, in its layouts");
  static runners::RunOptions opt;
  static std::string backend, layout = "torch", shard = "0/1", device = "cpu";
  static runners::ExecOptions exec;
  static bool allow_tf32 = false;
  sub->add_option("--backend", backend, "oracle | torch | exec | cudnn")
      ->required()->check(CLI::IsMember({"oracle", "torch", "exec", "cudnn"}));
  sub->add_option("--ref", opt.ref, "Reference set directory")->required();
  sub->add_option("--out", opt.out, "Run directory to write")->capture_default_str();
  sub->add_option("--layout", layout, "Preset (torch, channels_last, fortran, linear_in_out, linear_out_in) or layout JSON file")
      ->capture_default_str();
  sub->add_option("--only", opt.only, "Regex over 'dtype/case'");
  sub->add_option("--shard", shard, "i/n (0-based)")->capture_default_str();
  sub->add_option("--device", device, "torch/cudnn: cpu, cuda or cuda:N")->capture_default_str();
  static int threads = 0;
  sub->add_option("--threads", threads, "oracle/torch: threads (default: OMP_NUM_THREADS for torch, else every core)");
  sub->add_flag("--allow-tf32", allow_tf32, "torch: allow TF32 (off by default)");
  sub->add_option("--progress", opt.progress, "-1 auto, 0 quiet, 1 plain lines")->capture_default_str();
  sub->add_flag("--overwrite", opt.overwrite, "Replace a non-empty --out whole (everything in it is removed first)");
  auto* g = sub->add_option_group("exec", "Options of --backend exec");
  g->add_option("--cmd", exec.cmd, "Command run per case and op; {dir} {case} {op} {dtype} are expanded");
  g->add_option("--timeout", exec.timeout_s, "Seconds before the program is killed")->capture_default_str();
  g->add_flag("--keep-work", exec.keep_work, "Keep the inputs written for the program in RUN/work");
#ifdef VALIDATE_HAVE_CUDNN_RUNNER
  static runners::CudnnOptions cudnn;
  auto* cg = sub->add_option_group("cudnn", "Options of --backend cudnn");
  cg->add_option("--conv-mode", cudnn.conv_mode, "xcorr | conv (CUDNN_CONVOLUTION: weights must be flipped by the layout)")
      ->capture_default_str();
  cg->add_option("--math", cudnn.math, "fma (IEEE float32, no TF32) | tf32 | default")->capture_default_str();
  static std::string algo_every = "auto";
  cg->add_option("--algo", algo_every, "auto | all | NAME for every direction not named by --algo-*")
      ->capture_default_str();
  cg->add_option("--algo-fwd", cudnn.algo_fwd, "Forward algorithm");
  cg->add_option("--algo-bwd-data", cudnn.algo_bwd_data, "Backward-data algorithm");
  cg->add_option("--algo-bwd-filter", cudnn.algo_bwd_filter, "Backward-filter algorithm");
  cg->add_option("--repeat", cudnn.repeat, "Rerun N times and flag bitwise nondeterminism")->capture_default_str();
#endif
  sub->callback([&exit_code, sub] {
    auto fail = [&](const std::string& m) {
      std::cerr << "validate run: " << m << "\n";
      exit_code = 2;
    };
    auto sh = cases::parse_shard(shard);
    if (!sh) return fail(sh.message());
    opt.shard = *sh;
    auto layouts = layout::load_layout(layout);
    if (!layouts) return fail(layouts.message());
    opt.layout_name = layout;
    opt.layout_json = layout::to_json(*layouts);
    std::unique_ptr<runners::Runner> runner;
    if (backend == "oracle") {
      runner = runners::make_oracle_runner(*layouts, runners::OracleOptions{threads});
    } else if (backend == "exec") {
      if (exec.cmd.empty()) return fail("--backend exec needs --cmd 'PROGRAM {dir}'");
      exec.guard_dirs = {opt.ref};  // a program that writes into the reference set fails its case
      runner = runners::make_exec_runner(exec, *layouts);
    } else if (backend == "torch") {
#ifdef VALIDATE_HAVE_TORCH
      auto r = runners::make_torch_runner({device, allow_tf32, threads});
      if (!r) return fail(r.message());
      runner = std::move(*r);
#else
      return fail("--backend torch is not part of this build (LibTorch was not found at configure time)");
#endif
    } else {
#ifdef VALIDATE_HAVE_CUDNN_RUNNER
      if (sub->get_option("--device")->count()) cudnn.device = device;
      // --algo fills only the directions whose own option was not given: --algo-fwd FFT must not
      // force FFT (or a forward-only name) onto the backward passes.
      if (!sub->get_option("--algo-fwd")->count()) cudnn.algo_fwd = algo_every;
      if (!sub->get_option("--algo-bwd-data")->count()) cudnn.algo_bwd_data = algo_every;
      if (!sub->get_option("--algo-bwd-filter")->count()) cudnn.algo_bwd_filter = algo_every;
      auto r = runners::make_cudnn_runner(cudnn, *layouts);
      if (!r) return fail(r.message());
      runner = std::move(*r);
#else
      return fail("--backend cudnn is not part of this build (configure with the CUDA toolkit and cuDNN, VALIDATE_CUDA=ON)");
#endif
    }
    runners::install_interrupt_handlers();
    auto sum = runners::run_cases(*runner, opt, std::cout);
    if (!sum) return fail(sum.message());
    if (sum->interrupted) {
      for (auto& f : sum->failures) std::cout << "FAILED " << f << "\n";
      std::cerr << fmt::format("validate run: interrupted by signal {}: {} is incomplete (no manifest.json); "
                               "run it again with --overwrite\n", sum->interrupted, opt.out);
      exit_code = 128 + sum->interrupted;
      return;
    }
    for (auto& f : sum->failures) std::cout << "FAILED " << f << "\n";
    for (auto& f : sum->nondeterministic) std::cout << "NONDETERMINISTIC " << f << "\n";
    if (!sum->nondeterministic.empty())
      std::cout << fmt::format("validate run: {} op(s) gave different bits on --repeat (listed in run_info.json)\n",
                               sum->nondeterministic.size());
    std::cout << fmt::format("validate run: backend {} wrote {} ({} ok, {} error, {} skipped, {} unsupported) in {:.1f}s\n",
                             runner->name(), opt.out, sum->ok, sum->error, sum->skipped, sum->unsupported, sum->seconds);
    exit_code = sum->error ? 1 : 0;
  });
}

}  // namespace validate::cli
