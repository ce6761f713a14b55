#pragma once
// NumPy .npy files, format 1.0/2.0 (3.0 read), little-endian <f4 <f2 <f8. Written headers match
// numpy.save byte for byte (same dict order, padding to 64 bytes, trailing newline), so a file we
// write and numpy re-saves is identical. Fortran-order files are read and returned in C order.
#include <cstdint>
#include <string>

#include "validate/core/mapped_file.hpp"
#include "validate/core/result.hpp"
#include "validate/core/tensor.hpp"

namespace validate::npy {

struct Header {
  DType dtype = DType::float32;
  Shape shape;
  bool fortran_order = false;
  std::size_t data_offset = 0;  // bytes from the start of the file to the first element
  int major_version = 1;
};

// Parses and validates the header of `bytes` (the whole file): magic, version, dict, descr,
// shape, and that the data section is exactly as long as the shape says. `name` is for messages.
Result<Header> parse_header(const std::byte* bytes, std::size_t size, const std::string& name);

// The exact header numpy.save would write for this dtype and shape. fortran_order marks data whose
// first axis is fastest (numpy then reads it back with the right axes, as np.asfortranarray saves).
std::string make_header(DType dtype, const Shape& shape, bool fortran_order = false);

Result<Tensor> read(const std::string& path);
// Writes atomically (temporary file, then rename).
Status write(const std::string& path, const Tensor& t);
// The same, returning the file's size and SHA-256, computed from the bytes in memory (no read-back),
// for a manifest entry of what was just written.
struct Written {
  std::uint64_t size = 0;
  std::string sha256;
};
Result<Written> write_hashed(const std::string& path, const Tensor& t);

// A read-only, memory-mapped view of a .npy file's data: compare streams over this so gigabyte
// tensors are never copied into RAM. Data is in file order; fortran_order is reported, not undone.
class MappedArray {
 public:
  static Result<MappedArray> open(const std::string& path);
  const Header& header() const { return header_; }
  const std::byte* data() const { return file_.data() + header_.data_offset; }
  std::size_t nbytes() const { return file_.size() - header_.data_offset; }
  std::int64_t numel() const { return shape_numel(header_.shape); }
  const std::string& path() const { return file_.path(); }

 private:
  MappedFile file_;
  Header header_;
};

}  // namespace validate::npy
