#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "commands.hpp"
#include "validate/backends/module.hpp"
#include "validate/generate/generate.hpp"

namespace validate::cli {

void register_generate(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand("generate", "Compute seeded conv2d/matmul reference cases with LibTorch");
  static generate::GenerateOptions opt;
  static std::string dtypes, shard = "0/1", fill = "random";
  static std::uint64_t seed = 0;
  sub->add_option("--cases", opt.cases_path, "Case file")->capture_default_str();
  sub->add_option("--device", opt.device, "cpu, cuda or cuda:N")->capture_default_str();
  sub->add_option("--dtype", dtypes, "Comma list of float32,bfloat16,float16 (default: the case file's)");
  sub->add_option("--out", opt.out, "Output directory")->capture_default_str();
  auto* seed_opt = sub->add_option("--seed", seed, "Override the case file's seed");
  sub->add_option("--fill", fill, "random (N(0,1) scaled) or exact (small integers: float32 sums are exact)")
      ->check(CLI::IsMember({"random", "exact"}))->capture_default_str();
  sub->add_option("--only", opt.only, "Regex over 'dtype/case' (RE2 syntax: no backreferences or lookaround)");
  sub->add_option("--shard", shard, "i/n: generate every n-th case starting at i (0-based)")->capture_default_str();
  sub->add_option("--threads", opt.threads, "LibTorch/BLAS/input threads (default: OMP_NUM_THREADS, else every core)");
  sub->add_flag("--allow-tf32", opt.allow_tf32, "Allow TF32 for conv and matmul on CUDA (off by default)");
  sub->add_flag("--resume", opt.resume, "Keep cases an interrupted run with the same options finished; regenerate the rest");
  sub->add_flag("--overwrite", opt.overwrite, "Replace a non-empty --out whole (everything in it is removed first)");
  sub->add_option("--progress", opt.progress, "-1 auto, 0 quiet, 1 plain lines")->capture_default_str();
  sub->add_flag("--direct-io", opt.direct_io,
                "Write tensors of 8 MiB and more past the page cache (O_DIRECT): less CPU for a set read "
                "elsewhere or larger than memory; a later read here comes from the disk");
  sub->callback([&exit_code, seed_opt] {
    opt.dtypes.clear();
    std::stringstream ss(dtypes);
    for (std::string d; std::getline(ss, d, ',');) {
      auto t = parse_dtype(d);
      if (!t || *t == DType::float64) {
        std::cerr << "validate generate: --dtype '" << d << "' is not float32, bfloat16 or float16\n";
        exit_code = 2;
        return;
      }
      opt.dtypes.push_back(*t);
    }
    auto sh = cases::parse_shard(shard);
    if (!sh) {
      std::cerr << "validate generate: " << sh.message() << "\n";
      exit_code = 2;
      return;
    }
    opt.shard = *sh;
    if (opt.resume && opt.overwrite) {
      std::cerr << "validate generate: --resume keeps a directory's finished cases, --overwrite removes them: pick one\n";
      exit_code = 2;
      return;
    }
    opt.fill = fill == "exact" ? generate::Fill::exact : generate::Fill::random;
    if (seed_opt->count()) opt.seed = seed;
    // LibTorch lives in libvalidate_torch.so, loaded only now (backends/module.hpp).
    auto generate_fn = backends::load_generate();
    if (!generate_fn) {
      std::cerr << "validate generate: " << generate_fn.message() << "\n";
      exit_code = 2;
      return;
    }
    auto sum = (*generate_fn)(opt, std::cout);
    if (!sum) {
      std::cerr << "validate generate: " << sum.message() << "\n";
      exit_code = 2;
      return;
    }
    std::cout << fmt::format(
        "validate generate: {} case(s) written to {} on {} ({:.1f} MB, {:.1f}s: LibTorch {:.1f}s, inputs {:.1f}s, "
        "waiting on writes {:.1f}s){}{}\n",
        sum->cases_ok, opt.out, sum->device_used, static_cast<double>(sum->bytes) / 1e6, sum->seconds,
        sum->compute_seconds, sum->input_seconds, sum->wait_seconds,
        sum->cases_resumed ? fmt::format(", {} kept from the interrupted run", sum->cases_resumed) : "",
        sum->cases_failed ? fmt::format(", {} FAILED", sum->cases_failed) : "");
    exit_code = sum->cases_failed ? 1 : 0;
  });
}

}  // namespace validate::cli
