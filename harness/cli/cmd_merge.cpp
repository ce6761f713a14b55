#include <iostream>

#include <fmt/format.h>

#include "commands.hpp"
#include "validate/cases/merge.hpp"

namespace validate::cli {

void register_merge(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand(
      "merge", "Combine the shards of a generate or run into one set with a fresh manifest");
  static std::string out;
  static std::vector<std::string> shards;
  static cases::MergeOptions opt;
  out.clear();  // the statics outlive one parse (tests parse in process, more than once)
  shards.clear();
  opt = {};
  sub->add_option("out", out, "Merged set to write (a new or empty directory)")->required();
  sub->add_option("shards", shards, "Shard directories")->required();
  sub->add_flag("--overwrite", opt.overwrite, "Replace a non-empty OUT whole (everything in it is removed first)");
  sub->add_flag(
      "--allow-partial", opt.allow_partial,
      "Merge even when some shards of the --shard i/n split are missing (recorded as partial)");
  sub->callback([&exit_code] {
    auto sum = cases::merge_sets(out, shards, opt);
    if (!sum) {
      std::cerr << "validate merge: " << sum.message() << "\n";
      exit_code = 2;
      return;
    }
    std::cout << fmt::format("validate merge: {} shards, {} cases, {} files ({:.1f} MB) into {}\n",
                             sum->shards, sum->cases, sum->files,
                             static_cast<double>(sum->bytes) / 1e6, out);
    if (!sum->missing.empty()) {
      std::string list;
      for (const auto& m : sum->missing) list += (list.empty() ? "" : ", ") + m;
      std::cerr << "validate merge: WARNING: partial set, shards " << list
                << " missing (--allow-partial)\n";
    }
    exit_code = 0;
  });
}

}  // namespace validate::cli
