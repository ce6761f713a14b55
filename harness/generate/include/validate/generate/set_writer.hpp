#pragma once
// Writes the files of a set on background threads while the caller computes the next case:
// each tensor is hashed (file hash for the manifest, value hash for metadata, one pass) and written
// atomically, two files at a time so one's hashing overlaps the other's write. The queue is bounded
// in bytes so a fast producer cannot exhaust memory. A job (then()) is a barrier: it starts only
// after everything queued before it has finished.
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "validate/cases/refset.hpp"
#include "validate/core/result.hpp"
#include "validate/core/tensor.hpp"

namespace validate::generate {

class SetWriter {
 public:
  // direct_io: tensors of kDirectBytes and more bypass the page cache (fs::AtomicFile, direct).
  SetWriter(std::string root, std::size_t max_queued_bytes = std::size_t(1) << 30, int workers = 2,
            bool direct_io = false);
  static constexpr std::size_t kDirectBytes = std::size_t(8) << 20;
  ~SetWriter();
  SetWriter(const SetWriter&) = delete;
  SetWriter& operator=(const SetWriter&) = delete;

  // Queues `t` for <root>/<rel_path> as .npy. Blocks while the queue is over its byte budget.
  // With unit_log2, `t` is an error-bound scale stored as float16 (store_scale): its record
  // carries the unit, and its value hash is the data section's, as stored.
  void write_tensor(const std::string& rel_path, Tensor t, std::optional<int> unit_log2 = std::nullopt);
  // Queues `job` to run on the writer thread after everything queued before it (e.g. a case's
  // metadata, which needs the hashes of its tensors). A failing job is recorded, not fatal.
  void then(std::function<Status(SetWriter&)> job);
  // Writes a small text file now-ish (queued like a tensor) and records it in the manifest.
  void write_text(const std::string& rel_path, std::string text);
  // On the writer thread, inside a job: writes a small file at once and records it.
  Status write_text_now(const std::string& rel_path, const std::string& text);
  // Records a file that is already on disk (kept by --resume) as if this writer had written it.
  void adopt(const std::string& rel_path, const cases::ManifestEntry& entry, const cases::TensorRecord* record);
  // Blocks until the tensors queued or being written hold at most `bytes` (the caller is about to
  // allocate the rest of the memory budget for its next computation).
  void wait_below(std::size_t bytes);
  std::size_t max_queued_bytes() const { return max_bytes_; }
  // Waits for the queue to drain; returns the first error, if any.
  Status drain();

  // Valid on the writer thread inside a job, or after drain().
  const cases::FileMap& files() const { return files_; }
  const std::map<std::string, cases::TensorRecord>& records() const { return records_; }
  std::uint64_t bytes_written() const;
  const std::string& root() const { return root_; }

 private:
  struct Item {
    std::string rel;
    Tensor tensor;
    std::optional<int> unit_log2;
    std::string text;
    bool is_text = false;
    std::function<Status(SetWriter&)> job;
  };
  void loop();
  void process(Item& item);

  std::string root_;
  std::size_t max_bytes_;
  bool direct_io_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  std::size_t queued_bytes_ = 0;
  int busy_ = 0;  // items being processed
  bool job_running_ = false;
  bool stop_ = false;
  Status first_error_;
  cases::FileMap files_;
  std::map<std::string, cases::TensorRecord> records_;  // key: path relative to the root
  std::uint64_t written_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace validate::generate
