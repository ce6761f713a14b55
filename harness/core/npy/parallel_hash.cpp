#include "validate/core/parallel_hash.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <optional>
#include <utility>
#include <thread>

#include "validate/core/mapped_file.hpp"
#include "validate/core/npy.hpp"
#include "validate/core/sha256.hpp"
#include "validate/core/sha256_pair.hpp"

namespace validate {

namespace {

// A result file's scan riding on its hash: shape from the header, NaNs and max|x| from the visit.
struct Scan {
  FileHashResult& r;
  Float32Scan scan;
  Sha256Visit visit;
  Scan(const MappedFile& f, const npy::Header& h, FileHashResult& res) : r(res) {
    const auto* data = reinterpret_cast<const unsigned char*>(f.data());
    visit = {data, h.data_offset, data + h.data_offset, f.size() - h.data_offset,
             [this](const void* chunk, std::size_t n) { scan.add(static_cast<const float*>(chunk), n / sizeof(float)); }};
    r.size = f.size();
    r.shape = h.shape;
  }
  Scan(const Scan&) = delete;
  void done() {
    r.has_scan = true;
    r.nans = scan.nans;
    r.max_abs = scan.finite_max();
    r.hashed = true;
  }
};

// Opens a scan request's file; false when it is not a float32 C-order .npy (hash_one takes it).
bool open_scan(const FileHashRequest& rq, std::optional<MappedFile>& f, std::optional<npy::Header>& h) {
  auto m = MappedFile::open(rq.path);
  if (!m || m->size() == 0) return false;
  auto hd = npy::parse_header(m->data(), m->size(), rq.path);
  if (!hd || hd->dtype != DType::float32 || hd->fortran_order) return false;
  m->advise_sequential();
  f.emplace(std::move(*m));
  h.emplace(std::move(*hd));
  return true;
}

void hash_one(const FileHashRequest& rq, FileHashResult& r);

// Two result files on one core (sha256_header_payload_visit2); either one that is not a float32
// C-order .npy goes through hash_one alone.
void hash_scan_pair(const FileHashRequest& qa, FileHashResult& ra, const FileHashRequest& qb, FileHashResult& rb) {
  std::optional<MappedFile> fa, fb;
  std::optional<npy::Header> ha, hb;
  const bool a = open_scan(qa, fa, ha), b = open_scan(qb, fb, hb);
  if (!a || !b) {
    fa.reset();
    fb.reset();
    hash_one(qa, ra);
    hash_one(qb, rb);
    return;
  }
  Scan sa(*fa, *ha, ra), sb(*fb, *hb, rb);
  auto digests = sha256_header_payload_visit2(sa.visit, sb.visit);
  ra.sha256 = std::move(digests[0]);
  rb.sha256 = std::move(digests[1]);
  sa.done();
  sb.done();
}

void hash_one(const FileHashRequest& rq, FileHashResult& r) {
  if (!rq.value_hash && !rq.value_scan) {
    // A plain file hash streams through a buffer (sha256_file): a whole-file mapping would count
    // the file against the resident set (hostile.cli.metadata: a 100 MB listed file).
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
    Scan one(*f, *h, r);
    r.sha256 = sha256_header_payload_visit(one.visit);
    one.done();
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
  // Work units, largest first: result files to scan go two at a time (neighbours in size order, so
  // the pair ends nearly together), everything else alone.
  std::vector<std::pair<std::size_t, std::size_t>> units;  // (request, partner or npos)
  constexpr std::size_t none = static_cast<std::size_t>(-1);
  std::size_t waiting = none;
  for (std::size_t k : order) {
    const auto& rq = requests[k];
    if (rq.value_scan && !rq.value_hash) {
      if (waiting == none) {
        waiting = units.size();
        units.emplace_back(k, none);
      } else {
        units[waiting].second = k;
        waiting = none;
      }
    } else {
      units.emplace_back(k, none);
    }
  }
  unsigned n = threads > 0 ? static_cast<unsigned>(threads) : std::max(1u, std::thread::hardware_concurrency());
  n = static_cast<unsigned>(std::min<std::size_t>(n, std::max<std::size_t>(1, units.size())));
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t u; (u = next.fetch_add(1)) < units.size();) {
      const auto [a, b] = units[u];
      if (b == none)
        hash_one(requests[a], out[a]);
      else
        hash_scan_pair(requests[a], out[a], requests[b], out[b]);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  return out;
}

}  // namespace validate
