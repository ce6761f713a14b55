// The metric engine over .npy file pairs, as `validate compare` runs it (memory-mapped, one
// streaming pass plus the max|ref| pre-pass, all cores), timed per pair and in total.
//   bench_compare [--threads N] [--repeat R] [--known-max] REF.npy RUN.npy [REF2.npy RUN2.npy ...]
// --known-max: max|ref| is computed before the clock starts and handed over, as when the reference
// metadata records it (ops.<op>.tensors.<t>.max_abs), so the timed pass skips the pre-pass.
// Prints one line per pair and a total: seconds, GB read (both files), GB/s, kernel ISA.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "validate/metrics/metrics.hpp"
#include "validate/core/mapped_file.hpp"
#include "validate/core/npy.hpp"

using namespace validate;

int main(int argc, char** argv) {
  int threads = 0, repeat = 1;
  bool known_max = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--repeat" && i + 1 < argc)
      repeat = std::atoi(argv[++i]);
    else if (a == "--known-max")
      known_max = true;
    else
      files.push_back(a);
  }
  if (files.empty() || files.size() % 2) {
    std::fprintf(
        stderr,
        "usage: bench_compare [--threads N] [--repeat R] [--known-max] REF.npy RUN.npy [...]\n");
    return 2;
  }
  double best_total = 1e30, bytes = 0;
  for (int rep = 0; rep < repeat; ++rep) {
    double total = 0;
    bytes = 0;
    for (std::size_t p = 0; p < files.size(); p += 2) {
      std::optional<double> max_abs;
      if (known_max) {  // what the metadata would say; not timed
        auto m = npy::read(files[p]);
        if (!m) return 2;
        max_abs = compare::scan_reference(compare::view_of(*m), DType::float32, threads).max_abs;
      }
      const auto t0 = std::chrono::steady_clock::now();
      auto rf = MappedFile::open(files[p]);
      auto xf = MappedFile::open(files[p + 1]);
      if (!rf || !xf) {
        std::fprintf(stderr, "%s\n", (!rf ? rf.message() : xf.message()).c_str());
        return 2;
      }
      rf->advise_sequential();
      xf->advise_sequential();
      auto rh = npy::parse_header(rf->data(), rf->size(), files[p]);
      auto xh = npy::parse_header(xf->data(), xf->size(), files[p + 1]);
      if (!rh || !xh) {
        std::fprintf(stderr, "%s\n", (!rh ? rh.message() : xh.message()).c_str());
        return 2;
      }
      compare::ArrayView r{rf->data() + rh->data_offset, rh->dtype, shape_numel(rh->shape), false};
      compare::ArrayView x{xf->data() + xh->data_offset, xh->dtype, shape_numel(xh->shape), false};
      compare::MetricOptions opt;
      opt.threads = threads;
      opt.rtol = 5e-4;  // the float32 default gate, so the tolerance test runs too
      opt.ref_max_abs = max_abs;
      auto st = compare::compute_metrics(r, x, opt);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!st) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return 2;
      }
      const double b = static_cast<double>(rf->size() + xf->size());
      bytes += b;
      total += s;
      if (rep == repeat - 1)
        std::printf(
            "%-40s %8.3f s %7.2f GB/s  max_abs %.3g  max_ulp %llu  p99 %llu  pcc %.9f  beyond "
            "%lld\n",
            files[p + 1].c_str(), s, b / s / 1e9, st->max_abs,
            static_cast<unsigned long long>(st->ulp.max),
            static_cast<unsigned long long>(st->ulp.p99), st->pcc,
            static_cast<long long>(st->beyond_tolerance));
    }
    if (total < best_total) best_total = total;
  }
  std::printf("total %.3f s for %.2f GB: %.2f GB/s (kernel %s, best of %d)\n", best_total,
              bytes / 1e9, bytes / best_total / 1e9, compare::metrics_kernel_isa(), repeat);
  return 0;
}
