#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "commands.hpp"
#include "validate/core/fs.hpp"
#include "validate/core/npy.hpp"
#include "validate/layout/probe.hpp"

namespace validate::cli {

namespace {

// "2,3,4,5" -> {2, 3, 4, 5}
Result<Shape> parse_shape(const std::string& text) {
  Shape s;
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, ',');) {
    char* end = nullptr;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end || v < 1 || v > (1 << 20)) return Error{"--shape '" + text + "': expected sizes like 2,3,4,5"};
    s.push_back(v);
  }
  if (s.empty() || s.size() > 6) return Error{"--shape '" + text + "': 1 to 6 sizes"};
  return s;
}

}  // namespace

void register_probe(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand(
      "probe", "Write a small tensor whose values are their canonical flat index, in canonical layout and in a given layout");
  static std::string spec, shape_text = "2,3,4,5", axes, out;
  sub->add_option("--layout", spec, "Layout spec, e.g. CHWN:F or WHIO:F+flip=HW")->required();
  sub->add_option("--shape", shape_text, "Canonical shape (every axis a different size shows swaps)")->capture_default_str();
  sub->add_option("--axes", axes, "Canonical axes (default: NCHW for activation letters, OIHW for weight letters, MK/KN/MN for matrices)");
  sub->add_option("--out", out, "Directory to write canonical.npy, layout.npy and layout.bin into");
  sub->callback([&exit_code] {
    auto shape = parse_shape(shape_text);
    if (!shape) {
      std::cerr << "validate probe: " << shape.message() << "\n";
      exit_code = 2;
      return;
    }
    auto probe = layout::make_probe(spec, *shape, axes);
    if (!probe) {
      std::cerr << "validate probe: " << probe.message() << "\n";
      exit_code = 2;
      return;
    }
    // Equal sizes hide exactly the swaps a probe is for (H<->W on a square image).
    for (std::size_t i = 0; i < shape->size(); ++i)
      for (std::size_t j = i + 1; j < shape->size(); ++j)
        if ((*shape)[i] == (*shape)[j] && (*shape)[i] > 1)
          std::cerr << fmt::format("validate probe: warning: axes {} and {} are both {} long; a swap of "
                                   "them would not show (give every axis a different size)\n",
                                   probe->canonical_axes[i], probe->canonical_axes[j], (*shape)[i]);
    std::cout << layout::describe_probe(*probe);
    if (!out.empty()) {
      Status st = fs::make_dirs(out);
      if (st) st = npy::write(out + "/canonical.npy", probe->canonical);
      if (st) st = fs::write_atomic(out + "/layout.bin", probe->in_layout.bytes(), probe->in_layout.nbytes());
      // The same bytes as an .npy whose header says how to read them (axes in the spec's order,
      // fortran_order for :F), as `run --backend exec` writes inputs for a layout file with "npy".
      if (st)
        st = fs::write_atomic(out + "/layout.npy", probe->in_layout.bytes(), probe->in_layout.nbytes(),
                              npy::make_header(probe->in_layout.dtype(), probe->in_layout.shape(),
                                               probe->spec.fortran));
      if (!st) {
        std::cerr << "validate probe: " << st.message() << "\n";
        exit_code = 2;
        return;
      }
      std::cout << fmt::format("wrote {0}/canonical.npy, {0}/layout.npy and {0}/layout.bin (raw little-endian float32 in "
                               "the layout's memory order)\n", out);
    }
    exit_code = 0;
  });
}

}  // namespace validate::cli
