#pragma once
// Hashes many files on all cores: one file per worker at a time, largest first (SHA-256 of one
// file is sequential, so files are the unit of parallelism and the big ones must start early).
// A request may also ask for the float32 value hash of a .npy (the metadata hash, docs/formats.md): when
// the file is little-endian float32 in C order its payload is exactly the hashed bytes, so both
// digests come from one pass (sha256_pair.hpp). Files are opened without following a final
// symlink and without blocking on FIFOs; anything that is not a regular file is left unhashed
// for the caller's own checks to name. A result file can have its values scanned (NaN count,
// max|x|) in the same pass.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "validate/core/tensor.hpp"

namespace validate {

struct FileHashRequest {
  std::string path;
  bool value_hash = false;
  // A result: its NaN count and finite max|x| (Float32Scan) from the same pass as its file hash,
  // so verify does not read the file again. Ignored when value_hash is set.
  bool value_scan = false;
};

struct FileHashResult {
  bool hashed = false;  // false: not opened (missing, symlink, not a regular file, unreadable)
  std::string error;    // why not, when !hashed
  std::uint64_t size = 0;
  std::string sha256;  // of the whole file
  // Set when value_hash was asked and the file is a valid float32 C-order .npy.
  bool has_value = false;
  Shape shape;
  std::string value_sha256;
  // Set when value_scan was asked and the file is a valid float32 C-order .npy (shape too).
  bool has_scan = false;
  std::int64_t nans = 0;
  std::optional<double> max_abs;  // none when a value is infinite, as finite_max_abs
};

// threads <= 0: all hardware threads. Results are in request order.
std::vector<FileHashResult> hash_files(const std::vector<FileHashRequest>& requests, int threads = 0);

}  // namespace validate
