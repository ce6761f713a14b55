#pragma once
// Counting structure for ULP distances, fine enough for percentiles and cheap to merge.
//
// Fine bins (what percentiles are read from): distance 0 has its own bin; distances 1..1024 have
// one bin each (exact); above 1024 each octave [2^e + 1, 2^(e+1)] is split into 64 equal bins, so
// a percentile above 1024 ULP is reported as the upper edge of its bin, at most 1/64 of an octave
// (1.6%) above the true value. 2433 bins cover every distance a float32 can have (< 2^32).
//
// Coarse bins (what reports show): 0, 1, 2, 3-4, 5-8, 9-16, ..., (2^31, 2^32]; coarse bin c >= 2
// holds (2^(c-2), 2^(c-1)]. Every coarse edge is a fine edge, so the coarse histogram is exact.
#include <cstdint>
#include <string>
#include <vector>

namespace validate::compare {

class UlpHistogram {
 public:
  static constexpr int kExact = 1024;  // distances 0..1024 are binned exactly
  static constexpr int kSubBins = 64;  // bins per octave above kExact
  static constexpr int kFineBins = 1 + kExact + (32 - 10) * kSubBins;  // 2433
  static constexpr int kCoarseBins = 34;  // 0, 1, 2, 3-4, ..., (2^31, 2^32]

  UlpHistogram() : fine_(kFineBins, 0) {}

  // Fine bin of a distance (the kernel computes the same with vector integer operations).
  static int fine_bin(std::uint64_t d) {
    if (d <= static_cast<std::uint64_t>(kExact)) return static_cast<int>(d);
    const std::uint64_t v =
        d - 1;  // octaves are [2^e, 2^(e+1)) in v = d - 1, i.e. (2^e, 2^(e+1)] in d
    int e = 63;
    while (!((v >> e) & 1u)) --e;
    if (e > 31) e = 31;  // cannot happen for float32 distances; clamp defensively
    const int sub = static_cast<int>((v >> (e - 6)) & (kSubBins - 1));
    return 1 + kExact + (e - 10) * kSubBins + sub;
  }
  // Largest distance that falls into fine bin b.
  static std::uint64_t fine_upper(int b) {
    if (b <= kExact) return static_cast<std::uint64_t>(b);
    const int e = 10 + (b - 1 - kExact) / kSubBins, sub = (b - 1 - kExact) % kSubBins;
    return (std::uint64_t{1} << e) +
           static_cast<std::uint64_t>(sub + 1) * (std::uint64_t{1} << (e - 6));
  }
  static int coarse_bin(std::uint64_t d) {
    if (d <= 1) return static_cast<int>(d);
    int c = 1;
    std::uint64_t v = d - 1;
    while (v) {
      v >>= 1;
      ++c;
    }
    return c;  // ceil(log2 d) + 1
  }
  // "0", "1", "2", "3-4", "5-8", ...
  static std::string coarse_label(int c) {
    if (c <= 2) return std::to_string(c);
    return std::to_string((std::uint64_t{1} << (c - 2)) + 1) + "-" +
           std::to_string(std::uint64_t{1} << (c - 1));
  }

  void add(std::uint64_t d, std::uint64_t count = 1) { fine_[fine_bin(d)] += count; }
  void add_bin(int bin, std::uint64_t count) { fine_[bin] += count; }
  void merge(const UlpHistogram& o) {
    for (int i = 0; i < kFineBins; ++i) fine_[i] += o.fine_[i];
  }
  std::uint64_t total() const {
    std::uint64_t t = 0;
    for (auto c : fine_) t += c;
    return t;
  }
  // Nearest-rank percentile (p in [0, 1]): the smallest distance d such that at least
  // ceil(p * total) distances are <= d; 0 for an empty histogram. Exact up to kExact.
  std::uint64_t percentile(double p) const {
    const std::uint64_t n = total();
    if (n == 0) return 0;
    double want = p * static_cast<double>(n);
    std::uint64_t rank = static_cast<std::uint64_t>(want);
    if (static_cast<double>(rank) < want) ++rank;
    if (rank < 1) rank = 1;
    std::uint64_t seen = 0;
    for (int b = 0; b < kFineBins; ++b) {
      seen += fine_[b];
      if (seen >= rank) return fine_upper(b);
    }
    return fine_upper(kFineBins - 1);
  }
  // Counts per coarse bin, trailing empty bins dropped (at least one bin).
  std::vector<std::uint64_t> coarse() const {
    std::vector<std::uint64_t> c(kCoarseBins, 0);
    for (int b = 0; b < kFineBins; ++b) c[coarse_bin(fine_upper(b))] += fine_[b];
    while (c.size() > 1 && c.back() == 0) c.pop_back();
    return c;
  }
  const std::vector<std::uint64_t>& fine() const { return fine_; }

 private:
  std::vector<std::uint64_t> fine_;
};

}  // namespace validate::compare
