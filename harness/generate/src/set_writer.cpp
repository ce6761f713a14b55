#include "validate/generate/set_writer.hpp"

#include <algorithm>
#include <cmath>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <filesystem>
#include <optional>

#include "validate/core/fs.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/sha256.hpp"
#include "validate/core/tensor_hash.hpp"
#include "validate/core/sha256_pair.hpp"

namespace validate::generate {

SetWriter::SetWriter(std::string root, std::size_t max_queued_bytes, int workers, bool direct_io)
    : root_(std::move(root)), max_bytes_(max_queued_bytes), direct_io_(direct_io) {
  for (int i = 0; i < std::max(1, workers); ++i) threads_.emplace_back([this] { loop(); });
}

SetWriter::~SetWriter() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void SetWriter::write_tensor(const std::string& rel_path, Tensor t, std::optional<int> unit_log2) {
  std::unique_lock<std::mutex> lk(mu_);
  std::size_t n = t.nbytes();
  // Always admit one item even if it alone exceeds the budget, or a huge tensor would deadlock.
  cv_.wait(lk, [&] { return queued_bytes_ == 0 || queued_bytes_ + n <= max_bytes_; });
  queued_bytes_ += n;
  Item it;
  it.rel = rel_path;
  it.tensor = std::move(t);
  it.unit_log2 = unit_log2;
  queue_.push_back(std::move(it));
  cv_.notify_all();
}

void SetWriter::then(std::function<Status(SetWriter&)> job) {
  std::lock_guard<std::mutex> lk(mu_);
  Item it;
  it.job = std::move(job);
  queue_.push_back(std::move(it));
  cv_.notify_all();
}

void SetWriter::write_text(const std::string& rel_path, std::string text) {
  std::lock_guard<std::mutex> lk(mu_);
  Item it;
  it.rel = rel_path;
  it.text = std::move(text);
  it.is_text = true;
  queue_.push_back(std::move(it));
  cv_.notify_all();
}

void SetWriter::wait_below(std::size_t bytes) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return queued_bytes_ <= bytes; });
}

Status SetWriter::drain() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return queue_.empty() && busy_ == 0; });
  return first_error_;
}

std::uint64_t SetWriter::bytes_written() const {
  auto* self = const_cast<SetWriter*>(this);
  std::lock_guard<std::mutex> lk(self->mu_);
  return written_;
}

Status SetWriter::write_text_now(const std::string& rel_path, const std::string& text) {
  std::string path = (std::filesystem::path(root_) / rel_path).string();
  VALIDATE_TRY(fs::write_atomic(path, text));
  std::lock_guard<std::mutex> lk(mu_);
  files_[rel_path] = {text.size(), sha256_hex(text.data(), text.size())};
  written_ += text.size();
  return Status::ok();
}

void SetWriter::adopt(const std::string& rel_path, const cases::ManifestEntry& entry, const cases::TensorRecord* record) {
  std::lock_guard<std::mutex> lk(mu_);
  files_[rel_path] = entry;
  if (record) records_[rel_path] = *record;
}

void SetWriter::loop() {
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lk(mu_);
      // A job waits at the front until every item before it is done (its metadata needs their hashes).
      // A job also runs alone: it reads records() without the lock.
      cv_.wait(lk, [&] {
        return (stop_ && queue_.empty() && busy_ == 0) ||
               (!queue_.empty() && !job_running_ && (!queue_.front().job || busy_ == 0));
      });
      if (queue_.empty()) return;  // stop requested and nothing left
      item = std::move(queue_.front());
      queue_.pop_front();
      ++busy_;
      job_running_ = static_cast<bool>(item.job);
    }
    process(item);
    {
      std::lock_guard<std::mutex> lk(mu_);
      queued_bytes_ -= item.is_text || item.job ? 0 : item.tensor.nbytes();
      --busy_;
      if (item.job) job_running_ = false;
    }
    cv_.notify_all();
  }
}

void SetWriter::process(Item& item) {
  Status st;
  if (item.job) {
    st = item.job(*this);
  } else {
    std::string path = (std::filesystem::path(root_) / item.rel).string();
    st = fs::make_dirs(std::filesystem::path(path).parent_path().string());
    std::uint64_t size = 0;
    std::string file_hash;
    if (st && item.is_text) {
      st = write_text_now(item.rel, item.text);
    } else if (st) {
      const Tensor& t = item.tensor;
      const std::string header = npy::make_header(t.dtype(), t.shape());
      std::string value_hash;
      std::optional<double> max_abs;
      // One pass over the tensor, a cache-sized chunk at a time: each chunk is hashed, scanned and
      // handed to the kernel while it is in cache. Hashing it, scanning it and writing it as three
      // passes over the whole tensor read it from memory three times, and the kernel's copy into
      // the page cache from a cold source was a quarter of generate's CPU time.
      auto file = fs::AtomicFile::open(path, direct_io_ && t.nbytes() >= kDirectBytes);
      if (!file) st = file.status();
      if (st) st = file->write(header.data(), header.size());
      const bool scale = item.unit_log2.has_value();
      if (st && (t.dtype() == DType::float32 || scale)) {
        // The value hash is the payload's hash (a float32 tensor's values; a scale's data section
        // as stored): both digests from one pass (sha256_pair.hpp). A scale needs no max|x|.
        Float32Scan scan;
        auto both = sha256_header_payload_visit_pair({header.data(), header.size(), t.bytes(), t.nbytes(),
                                                      [&](const void* p, std::size_t n) {
                                                        if (!scale) scan.add(static_cast<const float*>(p), n / sizeof(float));
                                                        if (st) st = file->write(p, n);
                                                      }});
        file_hash = std::move(both.file);
        value_hash = std::move(both.payload);
        if (!scale) max_abs = scan.finite_max();
      } else if (st) {
        file_hash = sha256_header_payload_visit({header.data(), header.size(), t.bytes(), t.nbytes(),
                                                 [&](const void* p, std::size_t n) {
                                                   if (st) st = file->write(p, n);
                                                 }});
        value_hash = tensor_sha256(t);
        max_abs = finite_max_abs(t);
      }
      if (st) st = file->commit();
      size = header.size() + t.nbytes();
      if (st) {
        std::lock_guard<std::mutex> lk(mu_);
        records_[item.rel] = {value_hash, t.dtype(), max_abs, item.unit_log2};
      }
    }
    if (st && !item.is_text) {
      std::lock_guard<std::mutex> lk(mu_);
      files_[item.rel] = {size, file_hash};
      written_ += size;
    }
  }
  if (!st) {
    std::lock_guard<std::mutex> lk(mu_);
    if (first_error_) first_error_ = st;
  }
}

}  // namespace validate::generate
