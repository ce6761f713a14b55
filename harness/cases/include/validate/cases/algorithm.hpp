#pragma once
// The algorithm that computed a result tensor, as a run records it (run record info.algorithms,
// tensor -> name) and an exec layout file declares it ("algorithms": {op: {tensor: name}}). The
// error bound of the tensor follows it (docs/compare.md, "Algorithm-aware bounds"). A tensor with
// no entry was computed by the direct sum.
#include <optional>
#include <string>
#include <vector>

#include "validate/ops/op.hpp"

namespace validate::cases {

enum class AlgorithmKind { direct, split_k, winograd_f2, winograd_f4, winograd_f6, winograd, fft, fft_tiling, any };

struct Algorithm {
  AlgorithmKind kind = AlgorithmKind::direct;
  int split = 0;  // split_k: S, the number of partial sums
  bool operator==(const Algorithm& o) const { return kind == o.kind && split == o.split; }
};

// The names a record may hold ("split_k:S" with S a positive integer written "split_k:S").
inline const std::vector<std::string>& algorithm_names() {
  static const std::vector<std::string> v{"direct",      "split_k:S", "winograd_f2", "winograd_f4", "winograd_f6",
                                          "winograd",    "fft",       "fft_tiling",  "any"};
  return v;
}

inline std::string algorithm_name(const Algorithm& a) {
  switch (a.kind) {
    case AlgorithmKind::direct: return "direct";
    case AlgorithmKind::split_k: return "split_k:" + std::to_string(a.split);
    case AlgorithmKind::winograd_f2: return "winograd_f2";
    case AlgorithmKind::winograd_f4: return "winograd_f4";
    case AlgorithmKind::winograd_f6: return "winograd_f6";
    case AlgorithmKind::winograd: return "winograd";
    case AlgorithmKind::fft: return "fft";
    case AlgorithmKind::fft_tiling: return "fft_tiling";
    case AlgorithmKind::any: return "any";
  }
  return "direct";
}

// nullopt for a name that is not one of algorithm_names() (split_k needs 1 <= S <= 65536).
inline std::optional<Algorithm> parse_algorithm(const std::string& s) {
  const std::string sk = "split_k:";
  if (s.compare(0, sk.size(), sk) == 0) {
    const std::string digits = s.substr(sk.size());
    if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    const int n = std::stoi(digits);
    if (n < 1 || n > 65536) return std::nullopt;
    return Algorithm{AlgorithmKind::split_k, n};
  }
  for (AlgorithmKind k : {AlgorithmKind::direct, AlgorithmKind::winograd_f2, AlgorithmKind::winograd_f4,
                          AlgorithmKind::winograd_f6, AlgorithmKind::winograd, AlgorithmKind::fft,
                          AlgorithmKind::fft_tiling, AlgorithmKind::any})
    if (s == algorithm_name(Algorithm{k, 0})) return Algorithm{k, 0};
  return std::nullopt;
}

inline bool is_winograd(AlgorithmKind k) {
  return k == AlgorithmKind::winograd_f2 || k == AlgorithmKind::winograd_f4 || k == AlgorithmKind::winograd_f6 ||
         k == AlgorithmKind::winograd;
}
inline bool is_fft(AlgorithmKind k) { return k == AlgorithmKind::fft || k == AlgorithmKind::fft_tiling; }

// Whether a conv2d's geometry admits the algorithm: FFT needs stride 1 and dilation 1 (cuDNN's
// limit), Winograd a 3x3 kernel besides (cuDNN, oneDNN, NNPACK) and padding <= 2 (its backward
// data pass is the same Winograd convolution of dL/dy padded by 2 - padding). A conv_transpose2d
// is the backward-data pass of the conv2d of the same kernel, stride, padding and dilation (cuDNN
// runs it so): the same conditions. The direct sum and split-K apply to every op.
inline bool applicable(AlgorithmKind k, const ops::OpParams& p) {
  if (k == AlgorithmKind::direct || k == AlgorithmKind::split_k || k == AlgorithmKind::any) return true;
  auto admits = [k](const auto& c) {
    const bool unit = c.stride[0] == 1 && c.stride[1] == 1 && c.dilation[0] == 1 && c.dilation[1] == 1;
    if (is_fft(k)) return unit;
    return unit && c.kh == 3 && c.kw == 3 && c.padding[0] <= 2 && c.padding[1] <= 2;
  };
  if (const auto* c = std::get_if<ops::ConvParams>(&p)) return admits(*c);
  if (const auto* t = std::get_if<ops::ConvTransposeParams>(&p)) return admits(*t);
  return false;
}

}  // namespace validate::cases
