// Algorithm selection and the NCHW fallback decision (algo_select.hpp): no CUDA here, so the
// tests run every branch on a machine without a GPU.
#include "algo_select.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace validate::runners::cudnn_detail {

const char* math_type_name(MathType m) {
  switch (m) {
    case MathType::default_math:
      return "CUDNN_DEFAULT_MATH";
    case MathType::tensor_op:
      return "CUDNN_TENSOR_OP_MATH";
    case MathType::tensor_op_allow_conversion:
      return "CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION";
    case MathType::fma:
      return "CUDNN_FMA_MATH";
  }
  return "?";
}

MathType applied_math(MathType requested, MathType heuristic, bool float32) {
  if (requested == MathType::fma) return MathType::fma;
  if (float32 && heuristic == MathType::tensor_op_allow_conversion) return MathType::tensor_op;
  return heuristic;
}

bool cudnn_status_is_not_supported(int status) {
  if (status < 3000 || status >= 4000) return false;
  // 3005 incompatible CUDA driver, 3006 incompatible CUDA runtime, 3007 architecture mismatch,
  // 3008 runtime prerequisite missing, 3009 sub-library unavailable: the installation, not the
  // algorithm (cudnn_graph.h).
  return status < 3005 || status > 3009;
}

bool cudnn_status_rejects_call(int status) {
  return cudnn_status_is_not_supported(status) || (status >= 2000 && status < 3000);
}

std::string algorithm_family(Direction d, int algo) {
  // An enum value this build does not know: "any", the bound over every algorithm the geometry
  // admits, never a family it may not belong to.
  if (algo < 0 || algo >= algo_count(d)) return "any";
  const std::string n = algo_name(d, algo);
  if (n == "FFT") return "fft";
  if (n == "FFT_TILING") return "fft_tiling";
  if (n == "WINOGRAD" || n == "WINOGRAD_NONFUSED") return "winograd";
  return "direct";  // IMPLICIT_GEMM, IMPLICIT_PRECOMP_GEMM, GEMM, DIRECT, ALGO_0, ALGO_1, ALGO_3
}

std::string cudnn_enum_name(Direction d, int algo) {
  const char* prefix = d == Direction::fwd        ? "CUDNN_CONVOLUTION_FWD_"
                       : d == Direction::bwd_data ? "CUDNN_CONVOLUTION_BWD_DATA_"
                                                  : "CUDNN_CONVOLUTION_BWD_FILTER_";
  const std::string n = algo_name(d, algo);  // ALGO_0 already carries the ALGO_ of the enum
  return prefix + (n.rfind("ALGO_", 0) == 0 ? n : "ALGO_" + n);
}

std::string gemm_algorithm_family(int splitk_num, int reduction_scheme) {
  if (splitk_num > 1) return fmt::format("split_k:{}", splitk_num);
  if (splitk_num < 0 && reduction_scheme > 0) return "any";  // split, S unknown
  return "direct";
}

std::string Combo::label() const {
  return fmt::format("fwd={},bwd_data={},bwd_filter={}", algo_name(Direction::fwd, c[0].algo),
                     algo_name(Direction::bwd_data, c[1].algo),
                     algo_name(Direction::bwd_filter, c[2].algo));
}

namespace {

std::string names_of(Direction d, const std::vector<Choice>& v) {
  std::string s;
  for (const auto& c : v) s += (s.empty() ? "" : ", ") + algo_name(d, c.algo);
  return s;
}

void append(std::string& list, const std::string& item) {
  list += (list.empty() ? "" : "; ") + item;
}

}  // namespace

Selection select_algorithms(const AlgoTable& table, const AlgoRequest (&req)[3],
                            const TryCombo& try_combo) {
  Selection s;
  bool any_all = false;
  std::vector<Choice> lists[3];  // the candidates each direction's baseline is drawn from
  for (Direction d : kDirections) {
    const int i = static_cast<int>(d);
    const auto& cands = table.cand[i];
    if (cands.empty()) {
      s.outcome = Attempt::unsupported;
      s.message = fmt::format("cuDNN offers no {} algorithm for this case{}", direction_name(d),
                              table.rejected[i].empty() ? "" : " (" + table.rejected[i] + ")");
      return s;
    }
    if (req[i].kind == AlgoRequest::named) {
      auto it = std::find_if(cands.begin(), cands.end(),
                             [&](const Choice& c) { return c.algo == req[i].algo; });
      if (it == cands.end()) {
        s.outcome = Attempt::unsupported;
        s.message = fmt::format("{} algorithm {} is not supported for this case (cuDNN offers {})",
                                direction_name(d), algo_name(d, req[i].algo), names_of(d, cands));
        return s;
      }
      lists[i] = {*it};
      lists[i].front().selected_by = "named";
    } else {
      lists[i] = cands;
      for (auto& c : lists[i]) c.selected_by = "heuristic";
    }
    any_all = any_all || req[i].kind == AlgoRequest::all;
  }

  // The baseline: at most one execution per candidate (each unsupported one is dropped for good).
  std::vector<int> dropped_algos[3];
  std::size_t next[3] = {0, 0, 0};
  int calls = 0;
  Combo base;
  for (;;) {
    for (int i = 0; i < 3; ++i) base.c[i] = lists[i][next[i]];
    const Attempt a = try_combo(base);
    const int index = calls++;
    if (a.kind == Attempt::ok) {
      s.results.push_back({base, any_all ? base.label() : "", a, index});
      break;
    }
    if (a.kind == Attempt::error) {
      s.outcome = Attempt::error;
      s.message = a.message;
      s.results.push_back({base, any_all ? base.label() : "", a, index});
      return s;
    }
    const int i = static_cast<int>(a.direction);
    const Direction d = a.direction;
    append(s.dropped[i], algo_name(d, base.c[i].algo) + ": " + a.message);
    dropped_algos[i].push_back(base.c[i].algo);
    if (req[i].kind == AlgoRequest::named) {
      s.outcome = Attempt::unsupported;
      s.message = fmt::format(
          "{} algorithm {} is listed by cuDNN's heuristics for this case but not supported when "
          "executed: {}",
          direction_name(d), algo_name(d, base.c[i].algo), a.message);
      return s;
    }
    if (++next[i] == lists[i].size()) {
      s.outcome = Attempt::unsupported;
      s.message = fmt::format(
          "no {} algorithm that cuDNN's heuristics list for this case is supported when executed "
          "({})",
          direction_name(d), s.dropped[i]);
      return s;
    }
  }

  // --algo all: one direction varied at a time around the baseline.
  for (Direction d : kDirections) {
    const int i = static_cast<int>(d);
    if (req[i].kind != AlgoRequest::all) continue;
    for (const auto& c : table.cand[i]) {
      if (c.algo == base.c[i].algo) continue;
      Combo v = base;
      v.c[i] = c;
      v.c[i].selected_by = "all";
      if (std::find(dropped_algos[i].begin(), dropped_algos[i].end(), c.algo) !=
          dropped_algos[i].end()) {
        s.results.push_back(
            {v, v.label(),
             Attempt{Attempt::unsupported, d,
                     "not supported when executed (found while choosing the baseline; not run "
                     "again)"},
             -1});
        continue;
      }
      const Attempt a = try_combo(v);
      s.results.push_back({v, v.label(), a, calls++});
    }
  }
  return s;
}

Result<std::string> choose_layouts(const std::function<Status(bool convert)>& build,
                                   const std::function<bool(std::string* why)>& feasible,
                                   const std::function<bool()>& nothing_to_convert) {
  const Status given = build(false);
  std::string why;
  if (given && feasible(&why)) return std::string();
  if (nothing_to_convert()) {
    if (!given) return given;
    return std::string();  // every tensor is NCHW/OIHW already: the infeasibility is the answer
  }
  const std::string reason =
      given ? "cuDNN offered no algorithm for the layouts as given (" + why + ")"
            : "cuDNN refused the layouts as given (" + given.message() + ")";
  const Status converted = build(true);
  if (!converted) return Error{reason + "; the NCHW fallback failed too: " + converted.message()};
  return reason + "; every tensor not already NCHW/OIHW is converted to it on the device";
}

}  // namespace validate::runners::cudnn_detail
