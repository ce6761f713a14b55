#include <iostream>

#include <fmt/format.h>

#include "commands.hpp"
#include "validate/cases/verify.hpp"

namespace validate::cli {

void register_verify(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand("verify", "Re-hash every file of a set against its manifest and every input against its metadata; check every error-bound scale (one format, shape, finite, >= 0, ceiling and floor)");
  static std::string dir;
  sub->add_option("dir", dir, "Reference set or run directory")->required();
  sub->callback([&exit_code] {
    auto rep = cases::verify_set(dir);
    if (!rep) {
      std::cerr << "validate verify: " << rep.message() << "\n";
      exit_code = 2;
      return;
    }
    for (auto& w : rep->warnings) std::cout << "warning: " << w << "\n";
    for (auto& m : rep->mismatches) std::cout << "MISMATCH " << m << "\n";
    if (!rep->partial.empty()) std::cout << "PARTIAL " << rep->partial << "\n";
    std::cout << fmt::format("validate verify: {} files and {} input hashes checked, {} mismatch(es) in {}\n",
                             rep->files_checked, rep->inputs_checked, rep->mismatches.size(), dir);
    exit_code = rep->ok() ? 0 : 1;
  });
}

}  // namespace validate::cli
