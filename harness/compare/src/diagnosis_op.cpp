#include "validate/compare/diagnosis_op.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace validate::compare {

namespace {

void rerank(Diagnosis& dx, const std::string& tensor) {
  std::set<std::string> kinds;
  for (const auto& h : dx.matches) kinds.insert(h.code + "/" + h.tensor + "/" + h.side + "/" + h.spec);
  dx.ambiguous = kinds.size() > 1;
  dx.summary = diagnosis_summary(dx, tensor);
}

}  // namespace

void refine_op_diagnoses(std::vector<Entry>& entries) {
  std::map<std::tuple<std::string, std::string, std::string, ops::Op>, std::vector<Entry*>> by_op;
  for (auto& e : entries)
    if (e.op && !e.tensor.empty())
      by_op[{e.variant, e.dtype, e.case_name, *e.op}].push_back(&e);
  for (auto& [key, group] : by_op) {
    Entry* out = nullptr;
    Entry* loss = nullptr;
    for (Entry* e : group) {
      if (e->role == ops::Role::output) out = e;
      if (e->role == ops::Role::loss) loss = e;
    }
    // 1. The loss decides between writing and reading mistakes on the output. A loss that passed
    //    clears the computation only when the gradients agree: a mistake in how the output was
    //    written leaves them right (they are computed from the values the program held), so a
    //    failing gradient that names no mistake of its own says the output's values were wrong,
    //    and moved the loss by less than its bound (a flip of the data on a bfloat16 case).
    const bool gradient_unexplained = std::any_of(group.begin(), group.end(), [](const Entry* e) {
      return e->role == ops::Role::grad && e->verdict == Verdict::failed && e->diagnosis &&
             e->diagnosis->matches.empty() &&
             std::find(e->diagnosis->families.begin(), e->diagnosis->families.end(), "precision") ==
                 e->diagnosis->families.end();
    });
    if (out && out->diagnosis && out->diagnosis->matches.size() > 1 && loss &&
        (loss->verdict == Verdict::failed || loss->verdict == Verdict::passed)) {
      auto& m = out->diagnosis->matches;
      const bool loss_ok = loss->verdict == Verdict::passed && !gradient_unexplained;
      std::vector<Hypothesis> keep;
      for (const auto& h : m)
        if ((h.side == "output") == loss_ok) keep.push_back(h);
      if (!keep.empty() && keep.size() < m.size()) {
        m = std::move(keep);
        rerank(*out->diagnosis, out->tensor);
      }
    }
    // 2. Loss and gradients follow from a read or arithmetic mistake named on the output.
    const Hypothesis* root = out && out->diagnosis ? out->diagnosis->named() : nullptr;
    if (!root || root->side == "output") continue;
    const Hypothesis cause = *root;
    for (Entry* e : group) {
      if (e == out || e->verdict != Verdict::failed) continue;
      if (e->diagnosis && !e->diagnosis->matches.empty()) continue;
      Diagnosis dx = e->diagnosis ? *e->diagnosis : Diagnosis{};
      Hypothesis h = cause;
      h.params["follows_from"] = "output";
      h.passes = false;  // not recomputed for this tensor
      h.checked = 0;
      h.max_abs = 0;
      dx.matches.push_back(h);
      dx.ambiguous = false;
      dx.follows_from = out->tensor;
      dx.summary = diagnosis_summary(dx, e->tensor);
      e->diagnosis = std::move(dx);
    }
  }
}

}  // namespace validate::compare
