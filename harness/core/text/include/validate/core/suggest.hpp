#pragma once
// "did you mean": the nearest of a few known words to a misspelt one (a command, an option, a
// backend, a layout preset). Header-only: the CLI and the libraries that refuse a name (the layout
// presets) share one rule, so the same typo gets the same answer everywhere.
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace validate {

// Levenshtein distance. The words are short, so the quadratic table costs nothing.
inline std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The nearest candidate within a third of the word's length (at least 2 edits), else "": a guess
// further away than that names an unrelated word and misleads more than it helps.
inline std::string nearest_word(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates)
    if (const std::size_t d = edit_distance(word, c); d < best_d) {
      best_d = d;
      best = c;
    }
  return best;
}

// "; did you mean 'exec'?" for a near miss, "" when nothing is near.
inline std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string n = nearest_word(word, candidates);
  return n.empty() ? "" : "; did you mean '" + n + "'?";
}

}  // namespace validate
