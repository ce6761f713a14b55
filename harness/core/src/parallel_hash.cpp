#include "validate/core/parallel_hash.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <thread>

#include "validate/core/npy.hpp"
#include "validate/core/sha256.hpp"
#include "validate/core/sha256_pair.hpp"

namespace validate {

namespace {

void hash_one(const FileHashRequest& rq, FileHashResult& r) {
  if (!rq.value_hash) {
    // A plain file hash streams through a buffer (sha256_file): a whole-file mapping would count
    // the file against the resident set (hostile.cli.metadata: a 100 MB listed file; issue 10).
    auto h = sha256_file(rq.path);
    if (!h) {
      r.error = h.message();
      return;
    }
    struct stat st {};
    if (::lstat(rq.path.c_str(), &st) == 0) r.size = static_cast<std::size_t>(st.st_size);
    r.sha256 = std::move(*h);
    r.hashed = true;
    return;
  }
  // O_NOFOLLOW: a symlink is the caller's to judge; O_NONBLOCK: opening a FIFO must not hang.
  int fd = ::open(rq.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    r.error = std::strerror(errno);
    return;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    r.error = "not a regular file";
    return;
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  const unsigned char* data = nullptr;
  if (size) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      r.error = std::strerror(errno);
      ::close(fd);
      return;
    }
    ::madvise(p, size, MADV_SEQUENTIAL);
    data = static_cast<const unsigned char*>(p);
  }
  ::close(fd);
  r.size = size;
  bool done = false;
  if (rq.value_hash && size) {
    auto h = npy::parse_header(reinterpret_cast<const std::byte*>(data), size, rq.path);
    if (h && h->dtype == DType::float32 && !h->fortran_order) {
      auto pair = sha256_header_payload(data, h->data_offset, data + h->data_offset, size - h->data_offset);
      r.sha256 = std::move(pair.file);
      r.value_sha256 = std::move(pair.payload);
      r.shape = h->shape;
      r.has_value = true;
      done = true;
    }
  }
  if (!done) r.sha256 = sha256_hex_ni(data, size);
  if (data) ::munmap(const_cast<unsigned char*>(data), size);
  r.hashed = true;
}

}  // namespace

std::vector<FileHashResult> hash_files(const std::vector<FileHashRequest>& requests, int threads) {
  std::vector<FileHashResult> out(requests.size());
  // Largest first, so the longest sequential hash is not the last one started (LPT scheduling).
  std::vector<std::uint64_t> sizes(requests.size(), 0);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    struct stat st;
    if (::lstat(requests[i].path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) sizes[i] = static_cast<std::uint64_t>(st.st_size);
  }
  std::vector<std::size_t> order(requests.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return sizes[a] > sizes[b]; });
  unsigned n = threads > 0 ? static_cast<unsigned>(threads) : std::max(1u, std::thread::hardware_concurrency());
  n = static_cast<unsigned>(std::min<std::size_t>(n, std::max<std::size_t>(1, requests.size())));
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t k; (k = next.fetch_add(1)) < order.size();) hash_one(requests[order[k]], out[order[k]]);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  return out;
}

}  // namespace validate
