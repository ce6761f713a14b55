#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.hpp"
#include "validate/backends/registry.hpp"
#include "validate/core/suggest.hpp"
#include "validate/layout/preset.hpp"
#include "validate/backends/interrupt.hpp"
#include "validate/backends/run_driver.hpp"

namespace validate::cli {

namespace {

// Each backend's own options, in a group named after it; values land in `values` keyed by flag.
void add_backend_options(CLI::App* sub, std::map<std::string, std::map<std::string, std::string>>& values) {
  for (const auto& b : backends::registry().all()) {
    if (b.options.empty()) continue;
    auto* g = sub->add_option_group(b.name, "Options of --backend " + b.name);
    auto& v = values[b.name];
    for (const auto& o : b.options) {
      v[o.flag] = o.default_value;
      if (o.is_flag) {
        g->add_flag_callback(o.flag, [&v, flag = o.flag] { v[flag] = "1"; }, o.help);
      } else {
        auto* opt = g->add_option(o.flag, v[o.flag], o.help)->type_name(o.type_name);
        if (!o.default_value.empty()) opt->capture_default_str();
      }
    }
  }
}

std::string backend_help() {
  std::string h = "Backend:";
  for (const auto& b : backends::registry().all()) h += "\n  " + b.name + ": " + b.description;
  return h;
}

}  // namespace

void register_run(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand("run", "Run the cases of a reference set through a backend, in its layouts");
  static runners::RunOptions opt;
  static std::string backend, layout = "torch", shard = "0/1", device = "cpu";
  static bool allow_tf32 = false;
  static std::map<std::string, std::map<std::string, std::string>> backend_values;
  sub->add_option("--backend", backend, backend_help())
      ->required()
      ->check(CLI::Validator(
          [](std::string& name) -> std::string {
            const auto names = backends::registry().names();
            if (std::find(names.begin(), names.end(), name) != names.end()) return "";
            return fmt::format("'{}' is not a backend (this build knows: {}){}", name, fmt::join(names, ", "),
                               did_you_mean(name, names));
          },
          "BACKEND"));
  sub->add_option("--ref", opt.ref, "Reference set directory")->required();
  sub->add_option("--out", opt.out, "Run directory to write")->capture_default_str();
  sub->add_option("--layout", layout, "Preset (torch, channels_last, fortran, linear_in_out, linear_out_in) or layout JSON file")
      ->capture_default_str();
  sub->add_option("--only", opt.only, "Regex over 'dtype/case' (RE2 syntax: no backreferences or lookaround)");
  sub->add_option("--shard", shard, "i/n (0-based)")->capture_default_str();
  sub->add_option("--device", device, "torch/cudnn: cpu, cuda or cuda:N")->capture_default_str();
  static int threads = 0;
  sub->add_option("--threads", threads, "oracle/torch: threads (default: OMP_NUM_THREADS for torch, else every core)");
  sub->add_flag("--allow-tf32", allow_tf32, "torch: allow TF32 (off by default)");
  sub->add_option("--progress", opt.progress, "-1 auto, 0 quiet, 1 plain lines")->capture_default_str();
  sub->add_flag("--overwrite", opt.overwrite, "Replace a non-empty --out whole (everything in it is removed first)");
  add_backend_options(sub, backend_values);
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
    backends::BackendRequest req;
    req.layouts = &*layouts;
    req.ref = opt.ref;
    req.device = device;
    req.device_given = sub->get_option("--device")->count() > 0;
    req.threads = threads;
    req.allow_tf32 = allow_tf32;
    req.values = backend_values[backend];
    // Another backend's option is an error, not silently ignored (--cmd with --backend oracle).
    for (const auto& b : backends::registry().all())
      for (const auto& o : b.options)
        if (sub->get_option(o.flag)->count()) {
          if (b.name != backend)
            return fail(fmt::format("{} is an option of --backend {}, not of --backend {}", o.flag, b.name, backend));
          req.given.insert(o.flag);
        }
    auto made = backends::make_runner(backend, req);
    if (!made) return fail(made.message());
    std::unique_ptr<runners::Runner> runner = std::move(*made);
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
