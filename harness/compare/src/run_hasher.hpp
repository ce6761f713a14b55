#pragma once
// The run's tensor files mapped and hashed ahead of the comparison, on a thread of their own.
// SHA-256 of one file is sequential and costs more than the metrics' pass over it, so hashing file
// by file as each tensor is compared left the other cores idle for as long; here the next files are
// hashed while the current one is compared, two at a time on one core (with SHA-NI their round
// chains interleave, sha256_pair.hpp). The comparison takes each file's mapping together with the
// digest of exactly those bytes, so what is compared is what was hashed. Internal to validate_compare.
#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "validate/core/mapped_file.hpp"

namespace validate::compare::detail {

class RunHasher {
 public:
  struct Hashed {
    MappedFile file;
    std::string sha256;  // of file's bytes
  };
  // Starts hashing `paths`, in the order the comparison will take them, holding at most about
  // `window` bytes of mapped files it has not taken yet.
  RunHasher(std::vector<std::string> paths, std::size_t window);
  ~RunHasher();
  RunHasher(const RunHasher&) = delete;
  RunHasher& operator=(const RunHasher&) = delete;
  // The mapping and digest of `path`, waiting for them; files listed before it and not taken are
  // dropped. nullopt when `path` is not (or no longer) in the list or could not be opened: the
  // caller opens and hashes it itself, with its own errors.
  std::optional<Hashed> take(const std::string& path);

 private:
  void work();
  std::vector<std::string> paths_;
  std::map<std::string, std::size_t> index_;  // path -> its first position in paths_
  std::vector<std::optional<Hashed>> done_;
  std::vector<int> state_;  // per position: 0 not started, 1 hashing, 2 done
  std::vector<std::size_t> sizes_;
  std::size_t window_;
  std::size_t taken_ = 0;  // positions before this were taken or dropped
  bool stop_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread worker_;
};

}  // namespace validate::compare::detail
