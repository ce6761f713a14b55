#include <algorithm>
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "commands.hpp"
#include "validate/cases/readme.hpp"
#include "validate/cases/refset.hpp"
#include "validate/core/fs.hpp"

namespace validate::cli {

void register_list(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand("list", "Print the cases, dtypes, K and shapes of a reference set, with totals");
  static std::string dir;
  sub->add_option("dir", dir, "Reference set directory")->required();
  sub->callback([&exit_code] {
    auto list = cases::load_cases(dir);
    if (!list) {
      std::cerr << "validate list: " << list.message() << "\n";
      exit_code = 2;
      return;
    }
    auto manifest = cases::read_manifest(dir);
    // No manifest is an incomplete set, which list still shows; a manifest that is there but
    // unreadable or hostile is bad input (exit 2), not "incomplete".
    if (!manifest && fs::exists(dir + "/manifest.json")) {
      std::cerr << "validate list: " << manifest.message() << "\n";
      exit_code = 2;
      return;
    }
    // A training column only for a set that has training cases (the table of others is unchanged).
    const bool training = std::any_of(list->begin(), list->end(), [](const cases::RefCase& rc) { return rc.c.train.has_value(); });
    std::cout << fmt::format("{:<9} {:<22} {:>6}  {:<18} {:<16} {:<14} {:<12}{}\n", "dtype", "case", "K", "conv input",
                             "conv weight", "matmul A", "matmul B", training ? "  train" : "");
    std::map<std::string, int> per_dtype;
    std::uint64_t elements = 0;
    for (const auto& rc : *list) {
      const auto& c = rc.c;
      const cases::CaseSummary r = cases::summarize(c);
      std::string train;
      if (c.train)
        train = c.train->optimizer == train::Optimizer::adam
                    ? fmt::format("  {} Adam steps, lr {:g}, betas ({:g}, {:g}), eps {:g}, weight decay {:g}", c.train->steps,
                                  c.train->lr, c.train->beta1, c.train->beta2, c.train->eps, c.train->weight_decay)
                    : fmt::format("  {} SGD steps, lr {:g}, momentum {:g}, weight decay {:g}", c.train->steps, c.train->lr,
                                  c.train->momentum, c.train->weight_decay);
      else if (training)
        train = "  -";
      std::cout << fmt::format("{:<9} {:<22} {:>6}  {:<18} {:<16} {:<14} {:<12}{}\n", dtype_name(c.dtype), c.name, r.k,
                               r.first_input, r.second_input, r.matmul_a, r.matmul_b, train);
      // A line under a case whose inputs are not all the normal fill (docs/cli.md, "Input distributions").
      if (!c.input_dists.empty()) std::cout << "          inputs: " << cases::describe(c.input_dists) << "\n";
      ++per_dtype[std::string(dtype_name(c.dtype))];
      for (const auto& inst : c.ops)
        for (auto& t : c.tensors(inst.op())) elements += static_cast<std::uint64_t>(shape_numel(t.shape));
    }
    std::string dts;
    for (auto& [d, n] : per_dtype) dts += fmt::format("{}{} {}", dts.empty() ? "" : ", ", n, d);
    std::uint64_t bytes = 0;
    if (manifest)
      for (auto& [k, v] : (*manifest)["files"].items()) bytes += v.value("size", std::uint64_t{0});
    std::cout << fmt::format("total: {} cases ({}), {} tensor elements, {:.1f} MB on disk{}\n", list->size(), dts,
                             elements, static_cast<double>(bytes) / 1e6,
                             manifest ? "" : " (no manifest: incomplete set)");
    exit_code = 0;
  });
}

}  // namespace validate::cli
