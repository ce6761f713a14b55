#include "run_hasher.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <utility>

#include "validate/core/sha256_pair.hpp"

namespace validate::compare::detail {

RunHasher::RunHasher(std::vector<std::string> paths, std::size_t window)
    : paths_(std::move(paths)), done_(paths_.size()), state_(paths_.size(), 0), sizes_(paths_.size(), 0),
      window_(window) {
  for (std::size_t k = 0; k < paths_.size(); ++k) {
    index_.emplace(paths_[k], k);
    struct stat st {};
    if (::stat(paths_[k].c_str(), &st) == 0) sizes_[k] = static_cast<std::size_t>(st.st_size);
  }
  worker_ = std::thread([this] { work(); });
}

RunHasher::~RunHasher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void RunHasher::work() {
  for (;;) {
    std::size_t k = 0, partner = 0, count = 0;
    {
      // The first file not yet started within the window (the bytes mapped ahead of the
      // comparison, counted from the file it waits for, which always fits), and beside it the
      // unstarted file in the window nearest it in size: two files hash at nearly twice one's
      // rate only while both last.
      std::unique_lock<std::mutex> lock(mu_);
      auto pick = [&] {
        count = 0;
        std::size_t ahead = 0;
        for (std::size_t j = taken_; j < paths_.size(); ++j) {
          ahead += sizes_[j];
          if (j > taken_ && ahead > window_) break;
          if (state_[j] != 0) continue;
          if (count == 0) {
            k = j, count = 1;
          } else {
            const auto gap = [&](std::size_t q) { return sizes_[q] > sizes_[k] ? sizes_[q] - sizes_[k] : sizes_[k] - sizes_[q]; };
            if (count == 1 || gap(j) < gap(partner)) partner = j, count = 2;
          }
        }
        return count > 0;
      };
      cv_.wait(lock, [&] { return stop_ || pick() || taken_ >= paths_.size(); });
      if (stop_ || count == 0) return;
      state_[k] = 1;
      if (count == 2) state_[partner] = 1;
    }
    const std::size_t which[2] = {k, partner};
    std::array<std::optional<Hashed>, 2> got;
    std::size_t ok = 0;
    for (std::size_t q = 0; q < count; ++q) {
      auto f = MappedFile::open(paths_[which[q]]);
      if (!f) continue;  // the comparison opens it itself and reports why it cannot
      f->advise_sequential();
      got[q] = Hashed{std::move(*f), {}};
      ++ok;
    }
    auto visit_of = [](const Hashed& h) {
      return Sha256Visit{nullptr, 0, h.file.data(), h.file.size(), [](const void*, std::size_t) {}};
    };
    if (ok == 2) {
      auto d = sha256_header_payload_visit2(visit_of(*got[0]), visit_of(*got[1]));
      got[0]->sha256 = std::move(d[0]), got[1]->sha256 = std::move(d[1]);
    } else {
      for (auto& g : got)
        if (g) g->sha256 = sha256_header_payload_visit(visit_of(*g));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (std::size_t q = 0; q < count; ++q) {
        if (which[q] >= taken_) done_[which[q]] = std::move(got[q]);  // else dropped: unmapped now
        state_[which[q]] = 2;
      }
    }
    cv_.notify_all();
  }
}

std::optional<RunHasher::Hashed> RunHasher::take(const std::string& path) {
  auto at = index_.find(path);
  if (at == index_.end()) return std::nullopt;
  const std::size_t k = at->second;
  std::unique_lock<std::mutex> lock(mu_);
  if (k < taken_) return std::nullopt;
  for (std::size_t q = taken_; q < k; ++q) done_[q].reset();  // skipped: unmapped now
  taken_ = k;
  cv_.notify_all();
  cv_.wait(lock, [&] { return state_[k] == 2; });
  std::optional<Hashed> out = std::move(done_[k]);
  done_[k].reset();
  taken_ = k + 1;
  lock.unlock();
  cv_.notify_all();
  return out;
}

}  // namespace validate::compare::detail
