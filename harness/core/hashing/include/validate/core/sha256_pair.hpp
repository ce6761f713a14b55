#pragma once
// Two SHA-256 digests over one pass of a .npy file's bytes: the file hash (header + payload, for
// the manifest) and the payload hash (the float32 value hash of metadata, docs/formats.md). Our .npy
// headers are padded to 64 bytes, so payload block k is file block k + header/64: with the CPU's
// SHA instructions one message schedule feeds both states and the two round chains interleave,
// costing far less than hashing the bytes twice. Without SHA-NI (or with a header that is not a
// multiple of 64 bytes) it falls back to two OpenSSL streams over the same cache-hot chunks.
#include <array>
#include <cstddef>
#include <functional>
#include <string>

namespace validate {

struct Sha256Pair {
  std::string file;     // sha256(header || payload)
  std::string payload;  // sha256(payload)
};

Sha256Pair sha256_header_payload(const void* header, std::size_t header_size, const void* payload,
                                 std::size_t payload_size);

// sha256(header || payload) in one pass, calling visit(chunk, bytes) on each ~256 KiB of the payload
// right after hashing it, while it is in cache (verify scans a result's values for NaN and
// max|x| this way instead of reading the file a second time). SHA-NI when the header is a
// multiple of 64 bytes, OpenSSL otherwise.
struct Sha256Visit {
  const void* header;
  std::size_t header_size;
  const void* payload;
  std::size_t payload_size;
  std::function<void(const void*, std::size_t)> visit;
};
std::string sha256_header_payload_visit(const Sha256Visit& m);
// Both digests of sha256_header_payload, visiting each chunk after hashing it: generate writes
// each chunk of a result to its file and scans its values while the chunk is in cache, instead of
// reading the tensor from memory three times (hash, scan, the kernel's copy into the page cache).
Sha256Pair sha256_header_payload_visit_pair(const Sha256Visit& m);
// Two files at once on one core: with SHA-NI their round chains interleave (one chain is bound by
// the instruction's latency), nearly doubling a core's rate while both last.
std::array<std::string, 2> sha256_header_payload_visit2(const Sha256Visit& a, const Sha256Visit& b);

// Whether this CPU has the SHA extensions (CPUID.7.0:EBX[29]); tests use it to say which path ran.
bool sha256_cpu_has_sha_ni();

// The SHA-NI single-stream digest (falls back to OpenSSL without SHA-NI); exposed for tests.
std::string sha256_hex_ni(const void* data, std::size_t size);

}  // namespace validate
