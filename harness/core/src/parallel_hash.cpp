#include "validate/core/parallel_hash.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <thread>

#include "validate/core/mapped_file.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/sha256.hpp"
#include "validate/core/sha256_pair.hpp"

namespace validate {

namespace {

void hash_one(const FileHashRequest& rq, FileHashResult& r) {
  if (!rq.value_hash && !rq.value_scan) {
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
  // MappedFile opens as every reader does: no final symlink, no waiting on a FIFO, regular files only.
  auto f = MappedFile::open(rq.path);
  if (!f) {
    r.error = f.message();
    return;
  }
  f->advise_sequential();
  const auto* data = reinterpret_cast<const unsigned char*>(f->data());
  const std::size_t size = f->size();
  r.size = size;
  auto h = size ? npy::parse_header(f->data(), size, rq.path) : Result<npy::Header>(Error{"empty"});
  if (h && h->dtype == DType::float32 && !h->fortran_order && !rq.value_hash) {
    Float32Scan scan;
    r.sha256 = sha256_header_payload_visit(data, h->data_offset, data + h->data_offset, size - h->data_offset,
                                           [&](const void* chunk, std::size_t n) {
                                             scan.add(static_cast<const float*>(chunk), n / sizeof(float));
                                           });
    r.shape = h->shape;
    r.has_scan = true;
    r.nans = scan.nans;
    r.max_abs = scan.finite_max();
  } else if (h && h->dtype == DType::float32 && !h->fortran_order) {
    auto pair = sha256_header_payload(data, h->data_offset, data + h->data_offset, size - h->data_offset);
    r.sha256 = std::move(pair.file);
    r.value_sha256 = std::move(pair.payload);
    r.shape = h->shape;
    r.has_value = true;
  } else {
    r.sha256 = sha256_hex(data, size);  // a float16 or foreign .npy: verify_set() takes its values itself
  }
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
