#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "validate/core/npy.hpp"
#include "validate/core/parallel_hash.hpp"
#include "validate/core/rng.hpp"
#include "validate/core/sha256.hpp"
#include "validate/core/tensor_hash.hpp"
#include "validate/core/sha256_pair.hpp"

using namespace validate;

namespace {
std::vector<unsigned char> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<unsigned char> v(n);
  for (auto& c : v) c = static_cast<unsigned char>(g());
  return v;
}
}  // namespace

// Against OpenSSL's one-stream digests, at every padding boundary (55/56/63/64 bytes of tail) and
// with headers that do (0, 64, 128) and do not (3, 10) share the payload's block grid.
TEST(Sha256Pair, EqualsTwoOpenSslDigestsAtEveryBoundary) {
  SCOPED_TRACE(sha256_cpu_has_sha_ni() ? "SHA-NI path" : "OpenSSL fallback");
  for (std::size_t n : {0u, 1u, 55u, 56u, 57u, 63u, 64u, 65u, 119u, 120u, 127u, 128u, 129u, 4096u, 100003u}) {
    auto d = random_bytes(n + 200, static_cast<unsigned>(n));
    for (std::size_t h : {0u, 3u, 10u, 64u, 128u}) {
      auto pr = sha256_header_payload(d.data(), h, d.data() + h, n);
      EXPECT_EQ(pr.file, sha256_hex(d.data(), h + n)) << "n=" << n << " header=" << h;
      EXPECT_EQ(pr.payload, sha256_hex(d.data() + h, n)) << "n=" << n << " header=" << h;
    }
    EXPECT_EQ(sha256_hex_ni(d.data(), n), sha256_hex(d.data(), n)) << n;
  }
  EXPECT_EQ(sha256_hex_ni("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(ParallelHash, FileAndValueHashesMatchOneByOneAndSkipNonRegularFiles) {
  char tmpl[] = "/tmp/validate_phash_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::vector<FileHashRequest> rq;
  // float32 C-order (value hash from the pass), float64 (no value hash), fortran float32 (none),
  // raw bytes, a symlink, a FIFO and a missing file.
  Tensor a(DType::float32, {3, 5, 7});
  for (int i = 0; i < a.numel(); ++i) a.set(i, i * 0.25 - 3);
  Tensor b(DType::float64, {4, 2});
  for (int i = 0; i < b.numel(); ++i) b.set(i, i);
  ASSERT_TRUE(npy::write(dir + "/a.npy", a));
  ASSERT_TRUE(npy::write(dir + "/b.npy", b));
  {
    std::string hdr = npy::make_header(DType::float32, {5, 7}, true);
    std::ofstream f(dir + "/f.npy", std::ios::binary);
    f.write(hdr.data(), static_cast<std::streamsize>(hdr.size()));
    f.write(reinterpret_cast<const char*>(a.bytes()), 35 * 4);
  }
  auto raw = random_bytes(3 << 20, 7);
  std::ofstream(dir + "/raw.bin", std::ios::binary).write(reinterpret_cast<const char*>(raw.data()), raw.size());
  ASSERT_EQ(::symlink((dir + "/a.npy").c_str(), (dir + "/link.npy").c_str()), 0);
  ASSERT_EQ(::mkfifo((dir + "/fifo.npy").c_str(), 0600), 0);
  for (const char* n : {"a.npy", "b.npy", "f.npy", "raw.bin", "link.npy", "fifo.npy", "missing.npy"})
    rq.push_back({dir + "/" + n, true});
  auto r = hash_files(rq, 2);
  ASSERT_EQ(r.size(), rq.size());
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(r[i].hashed) << rq[i].path << ": " << r[i].error;
    EXPECT_EQ(r[i].sha256, *sha256_file(rq[i].path)) << rq[i].path;
  }
  EXPECT_EQ(r[3].size, raw.size());
  ASSERT_TRUE(r[0].has_value);
  EXPECT_EQ(r[0].value_sha256, tensor_sha256(a));
  EXPECT_EQ(r[0].shape, (Shape{3, 5, 7}));
  EXPECT_FALSE(r[1].has_value);  // float64: the caller converts and hashes itself
  EXPECT_FALSE(r[2].has_value);  // Fortran order: the value hash is over C order
  EXPECT_FALSE(r[3].has_value);
  for (int i = 4; i < 7; ++i) EXPECT_FALSE(r[i].hashed) << rq[i].path;  // returned at once, no hang on the FIFO
  for (const char* n : {"a.npy", "b.npy", "f.npy", "raw.bin", "link.npy", "fifo.npy"}) std::remove((dir + "/" + n).c_str());
  ::rmdir(dir.c_str());
}

// Float32Scan against a plain loop (NaN count; max |x| over the non-NaN values with fmax's NaN
// skipping), fed in uneven pieces as the hash pass feeds it, on values with NaNs of both signs,
// -0, denormals and, in a second array, an infinity.
TEST(Float32Scan, MatchesAPlainLoopFedInPieces) {
  std::mt19937 g(5);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> v(100003);
  for (auto& x : v) x = nd(g);
  v[7] = std::nanf("");
  v[8] = -std::nanf("");
  v[99999] = std::nanf("");
  v[11] = -0.0f;
  v[12] = 1e-42f;
  v[50000] = -97.5f;  // the largest magnitude, negative
  for (int with_inf = 0; with_inf < 2; ++with_inf) {
    if (with_inf) v[777] = -std::numeric_limits<float>::infinity();
    std::int64_t nans = 0;
    double m = 0;
    for (float x : v) {
      nans += std::isnan(x);
      if (!std::isnan(x)) m = std::max(m, std::fabs(static_cast<double>(x)));
    }
    Float32Scan scan;
    for (std::size_t off = 0, piece = 1; off < v.size(); off += piece, piece = piece * 3 + 1)
      scan.add(v.data() + off, std::min(piece, v.size() - off));
    EXPECT_EQ(scan.nans, nans);
    EXPECT_EQ(scan.nans, 3);
    if (with_inf) {
      EXPECT_FALSE(scan.finite_max().has_value());
    } else {
      ASSERT_TRUE(scan.finite_max().has_value());
      EXPECT_EQ(*scan.finite_max(), m);
      EXPECT_EQ(*scan.finite_max(), 97.5);
    }
    Tensor t = Tensor::uninitialized(DType::float32, {static_cast<std::int64_t>(v.size())});
    std::memcpy(t.bytes(), v.data(), t.nbytes());
    EXPECT_EQ(finite_max_abs(t), scan.finite_max());
  }
}

// A result's scan (value_scan) comes from the hash pass itself: same file hash as OpenSSL over the
// file, NaN count and max |x| as npy::read + a plain loop. Results are hashed two at a time on a
// core: here pairs of unequal length (several 256 KiB chunks against one partial chunk), a NaN in a
// last partial chunk, an infinity, and a float64 file whose partner then goes alone.
TEST(ParallelHash, ResultScanInTheHashPassMatchesReadingTheFile) {
  char tmpl[] = "/tmp/validate_phash_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::vector<Shape> shapes{{3, 70001}, {2, 3, 30011}, {50003}, {3}, {1, 1}};
  std::vector<std::string> names;
  for (std::size_t f = 0; f < shapes.size(); ++f) {
    Tensor a(DType::float32, shapes[f]);
    for (std::int64_t i = 0; i < a.numel(); ++i)
      a.set(i, std::sin(0.001 * static_cast<double>(i) + static_cast<double>(f)) * static_cast<double>(i % 1000));
    if (f == 0) a.data<float>()[a.numel() - 5] = std::nanf("");
    if (f == 0) a.data<float>()[123456] = -2048.5f;
    if (f == 2) a.data<float>()[777] = std::numeric_limits<float>::infinity();
    names.push_back(dir + "/r" + std::to_string(f) + ".npy");
    ASSERT_TRUE(npy::write(names.back(), a));
  }
  Tensor b(DType::float64, {4, 2});
  names.push_back(dir + "/b.npy");
  ASSERT_TRUE(npy::write(names.back(), b));
  std::vector<FileHashRequest> rq;
  for (const auto& n : names) rq.push_back({n, false, true});
  auto r = hash_files(rq, 2);
  ASSERT_EQ(r.size(), rq.size());
  for (std::size_t f = 0; f < rq.size(); ++f) {
    SCOPED_TRACE(rq[f].path);
    ASSERT_TRUE(r[f].hashed) << r[f].error;
    EXPECT_EQ(r[f].sha256, *sha256_file(rq[f].path));
    EXPECT_FALSE(r[f].has_value);
    if (f + 1 == rq.size()) {
      EXPECT_FALSE(r[f].has_scan);  // float64: verify reads it itself
      continue;
    }
    ASSERT_TRUE(r[f].has_scan);
    EXPECT_EQ(r[f].shape, shapes[f]);
    auto back = npy::read(rq[f].path);
    ASSERT_TRUE(back);
    std::int64_t nans = 0;
    double m = 0;
    for (std::int64_t i = 0; i < back->numel(); ++i) {
      const float x = back->data<float>()[i];
      nans += std::isnan(x);
      if (!std::isnan(x)) m = std::max(m, std::fabs(static_cast<double>(x)));
    }
    EXPECT_EQ(r[f].nans, nans);
    EXPECT_EQ(r[f].max_abs.has_value(), std::isfinite(m));
    if (r[f].max_abs) {
      EXPECT_EQ(*r[f].max_abs, m);
    }
  }
  EXPECT_EQ(r[0].nans, 1);
  EXPECT_EQ(r[0].max_abs, std::optional<double>(2048.5));
  EXPECT_FALSE(r[2].max_abs.has_value());
  for (const auto& n : names) std::remove(n.c_str());
  ::rmdir(dir.c_str());
}

// sha256_header_payload_visit2 against OpenSSL on two messages of every relative length (one
// empty, equal, one a chunk longer, both ending mid-block), visiting every payload byte once.
TEST(Sha256Pair, TwoFilesOnOneCoreEqualOpenSsl) {
  SCOPED_TRACE(sha256_cpu_has_sha_ni() ? "SHA-NI path" : "OpenSSL fallback");
  const std::size_t chunk = 256 << 10;
  for (auto [na, nb] : {std::pair<std::size_t, std::size_t>{0, 100}, {chunk, chunk}, {3 * chunk + 37, chunk - 1},
                        {chunk + 64, 2 * chunk + 55}}) {
    auto da = random_bytes(128 + na, static_cast<unsigned>(na)), db = random_bytes(64 + nb, static_cast<unsigned>(nb) + 1);
    std::size_t seen_a = 0, seen_b = 0;
    Sha256Visit a{da.data(), 128, da.data() + 128, na, [&](const void* p, std::size_t n) {
                    EXPECT_EQ(p, da.data() + 128 + seen_a);
                    seen_a += n;
                  }};
    Sha256Visit b{db.data(), 64, db.data() + 64, nb, [&](const void* p, std::size_t n) {
                    EXPECT_EQ(p, db.data() + 64 + seen_b);
                    seen_b += n;
                  }};
    auto d = sha256_header_payload_visit2(a, b);
    EXPECT_EQ(d[0], sha256_hex(da.data(), da.size())) << na << " " << nb;
    EXPECT_EQ(d[1], sha256_hex(db.data(), db.size())) << na << " " << nb;
    EXPECT_EQ(seen_a, na);
    EXPECT_EQ(seen_b, nb);
  }
}

// Both digests of one file with a visit per chunk (what generate writes each result through):
// equal to OpenSSL's one-stream digests of header+payload and of the payload, every payload byte
// visited once and in order, on the SHA-NI grid (header 128) and off it (10: the OpenSSL path).
TEST(Sha256Pair, VisitedPairEqualsOpenSslAndVisitsEveryByteInOrder) {
  SCOPED_TRACE(sha256_cpu_has_sha_ni() ? "SHA-NI path" : "OpenSSL fallback");
  const std::size_t chunk = 256 << 10;
  for (std::size_t n : {std::size_t{0}, std::size_t{63}, chunk - 1, chunk, chunk + 1, 3 * chunk + 4 * 37}) {
    for (std::size_t h : {std::size_t{128}, std::size_t{10}}) {
      auto d = random_bytes(h + n, static_cast<unsigned>(n + h));
      std::vector<unsigned char> seen;
      Sha256Visit m{d.data(), h, d.data() + h, n, [&](const void* p, std::size_t k) {
                      EXPECT_EQ(p, d.data() + h + seen.size());
                      EXPECT_LE(k, chunk);
                      seen.insert(seen.end(), static_cast<const unsigned char*>(p), static_cast<const unsigned char*>(p) + k);
                    }};
      auto pr = sha256_header_payload_visit_pair(m);
      EXPECT_EQ(pr.file, sha256_hex(d.data(), h + n)) << "n=" << n << " header=" << h;
      EXPECT_EQ(pr.payload, sha256_hex(d.data() + h, n)) << "n=" << n << " header=" << h;
      EXPECT_TRUE(std::equal(seen.begin(), seen.end(), d.begin() + static_cast<std::ptrdiff_t>(h)) && seen.size() == n)
          << "n=" << n << " header=" << h;
    }
  }
}

// The vector path of fill_normal (AVX2 + libmvec, with its rounding-boundary fallback) must give
// the scalar definition's bits at every offset, scale and block alignment.
TEST(PhiloxVector, FillNormalEqualsTheScalarDefinitionBitForBit) {
  for (std::uint64_t seed : {42ull, 7ull}) {
    const Philox rng(seed, "k0072_ic008", "conv2d", "input");
    for (std::uint64_t first : {0ull, 1ull, 6ull, 4096ull + 3}) {
      const std::size_t n = (1u << 20) + 37;
      std::vector<float> got(n);
      rng.fill_normal(got.data(), n, 0.37f, first);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const float want = rng.normal(first + i) * 0.37f;
        bad += std::memcmp(&want, &got[i], 4) != 0;
      }
      EXPECT_EQ(bad, 0u) << "seed " << seed << " first " << first;
    }
  }
}
