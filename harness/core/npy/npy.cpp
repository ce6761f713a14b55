#include "validate/core/npy.hpp"

#include <cstring>
#include <limits>
#include <vector>

#include "validate/core/fs.hpp"
#include "validate/core/sha256.hpp"

namespace validate::npy {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;
// numpy pads the header so the data starts on a 64-byte boundary, and reserves room for the
// first dimension to grow to 21 digits (GROWTH_AXIS_MAX_DIGITS) so files can be appended in place.
constexpr std::size_t kHeaderAlign = 64;
constexpr std::size_t kGrowthDigits = 21;

const char* descr_of(DType d) {
  switch (d) {
    case DType::float32: return "<f4";
    case DType::float16: return "<f2";
    case DType::float64: return "<f8";
    case DType::bfloat16: return nullptr;  // numpy has no bfloat16; references store it as <f4
  }
  return nullptr;
}

Error bad(const std::string& name, const std::string& what) { return Error{name + ": " + what}; }

// Finds the value text after 'key': in a numpy header dict.
Result<std::string_view> dict_value(std::string_view dict, std::string_view key, const std::string& name) {
  std::string quoted = "'" + std::string(key) + "'";
  auto pos = dict.find(quoted);
  if (pos == std::string_view::npos) {
    quoted = "\"" + std::string(key) + "\"";
    pos = dict.find(quoted);
  }
  if (pos == std::string_view::npos) return bad(name, "npy header has no '" + std::string(key) + "' key");
  pos = dict.find(':', pos + quoted.size());
  if (pos == std::string_view::npos) return bad(name, "npy header: no ':' after '" + std::string(key) + "'");
  ++pos;
  while (pos < dict.size() && dict[pos] == ' ') ++pos;
  return dict.substr(pos);
}

}  // namespace

Result<Header> parse_header(const std::byte* bytes, std::size_t size, const std::string& name) {
  if (size < kMagicLen + 4 || std::memcmp(bytes, kMagic, kMagicLen) != 0)
    return bad(name, "not a .npy file (missing \\x93NUMPY magic)");
  Header h;
  h.major_version = static_cast<int>(bytes[6]);
  std::size_t header_len = 0, prefix = 0;
  if (h.major_version == 1) {
    header_len = static_cast<std::size_t>(bytes[8]) | (static_cast<std::size_t>(bytes[9]) << 8);
    prefix = 10;
  } else if (h.major_version == 2 || h.major_version == 3) {
    if (size < 12) return bad(name, "truncated .npy header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<std::size_t>(bytes[8 + i]) << (8 * i);
    prefix = 12;
  } else {
    return bad(name, "unsupported .npy format version " + std::to_string(h.major_version));
  }
  if (header_len > size - prefix)
    return bad(name, "npy header length " + std::to_string(header_len) + " runs past the end of the file (" +
                         std::to_string(size) + " bytes)");
  std::string_view dict(reinterpret_cast<const char*>(bytes) + prefix, header_len);
  h.data_offset = prefix + header_len;

  auto descr_v = dict_value(dict, "descr", name);
  if (!descr_v) return descr_v.status();
  std::string_view dv = *descr_v;
  if (dv.empty() || (dv[0] != '\'' && dv[0] != '"')) return bad(name, "npy descr is not a simple string (structured or object dtype)");
  auto end = dv.find(dv[0], 1);
  if (end == std::string_view::npos) return bad(name, "npy descr is not terminated");
  std::string descr(dv.substr(1, end - 1));
  if (descr == "<f4" || descr == "=f4") h.dtype = DType::float32;
  else if (descr == "<f2" || descr == "=f2") h.dtype = DType::float16;
  else if (descr == "<f8" || descr == "=f8") h.dtype = DType::float64;
  else if (!descr.empty() && descr[0] == '>')
    return bad(name, "big-endian dtype '" + descr + "' is not supported (expected <f4, <f2 or <f8)");
  else
    return bad(name, "unsupported dtype '" + descr + "' (expected <f4, <f2 or <f8)");

  auto fo = dict_value(dict, "fortran_order", name);
  if (!fo) return fo.status();
  if (fo->substr(0, 4) == "True") h.fortran_order = true;
  else if (fo->substr(0, 5) == "False") h.fortran_order = false;
  else return bad(name, "npy fortran_order is neither True nor False");

  auto sv = dict_value(dict, "shape", name);
  if (!sv) return sv.status();
  std::string_view s = *sv;
  if (s.empty() || s[0] != '(') return bad(name, "npy shape is not a tuple");
  auto close = s.find(')');
  if (close == std::string_view::npos) return bad(name, "npy shape tuple is not closed");
  std::string_view inner = s.substr(1, close - 1);
  std::size_t i = 0;
  // The element count, and the product of the non-zero dimensions: that one must fit too, since
  // shape_numel() and the Fortran-order strides multiply the dimensions in order, so (2^40, 2^23, 0)
  // overflowed int64 although it has no elements (found by fuzz_npy's invariant).
  std::uint64_t numel = 1, nonzero = 1;
  bool overflow = false;
  while (i < inner.size()) {
    while (i < inner.size() && (inner[i] == ' ' || inner[i] == ',')) ++i;
    if (i >= inner.size()) break;
    if (inner[i] < '0' || inner[i] > '9') return bad(name, "npy shape has a non-integer or negative dimension");
    std::uint64_t v = 0;
    while (i < inner.size() && inner[i] >= '0' && inner[i] <= '9') {
      if (v > (std::numeric_limits<std::uint64_t>::max() - 9) / 10) return bad(name, "npy shape dimension is too large");
      v = v * 10 + static_cast<std::uint64_t>(inner[i] - '0');
      ++i;
    }
    if (i < inner.size() && inner[i] != ',' && inner[i] != ' ' && inner[i] != 'L')
      return bad(name, "npy shape has a non-integer dimension");
    if (i < inner.size() && inner[i] == 'L') ++i;
    constexpr std::uint64_t kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / 8;
    if (v > kMax) overflow = true;
    if (v != 0 && nonzero > kMax / v) overflow = true;
    if (v != 0) nonzero *= v;
    numel *= v;
    h.shape.push_back(static_cast<std::int64_t>(v));
  }
  if (h.shape.size() > 32) return bad(name, "npy shape has more than 32 dimensions");
  std::size_t esize = dtype_size(h.dtype);
  if (overflow || numel > (std::numeric_limits<std::uint64_t>::max() / esize))
    return bad(name, "npy shape " + shape_to_string(h.shape) + " has more elements than can be addressed");
  std::uint64_t want = numel * esize;
  std::uint64_t have = size - h.data_offset;
  if (have < want)
    return bad(name, "truncated data: shape " + shape_to_string(h.shape) + " needs " + std::to_string(want) +
                         " bytes, the file has " + std::to_string(have));
  if (have > want)
    return bad(name, std::to_string(have - want) + " trailing bytes after the data of shape " + shape_to_string(h.shape));
  return h;
}

std::string make_header(DType dtype, const Shape& shape, bool fortran_order) {
  std::string shape_repr = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) shape_repr += ", ";
    shape_repr += std::to_string(shape[i]);
  }
  if (shape.size() == 1) shape_repr += ",";
  shape_repr += ")";
  std::string dict = std::string("{'descr': '") + descr_of(dtype) + "', 'fortran_order': " +
                     (fortran_order ? "True" : "False") + ", 'shape': " + shape_repr + ", }";
  if (!shape.empty())
    dict.append(kGrowthDigits - std::to_string(fortran_order ? shape.back() : shape.front()).size(), ' ');
  // Version 1.0 holds headers up to 65535 bytes, which covers every shape we write.
  std::size_t hlen = dict.size() + 1;  // + trailing newline
  std::size_t padlen = kHeaderAlign - ((kMagicLen + 2 + 2 + hlen) % kHeaderAlign);
  if (padlen == kHeaderAlign) padlen = 0;
  std::size_t total = hlen + padlen;
  std::string out(kMagic, kMagicLen);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(total & 0xff));
  out.push_back(static_cast<char>((total >> 8) & 0xff));
  out += dict;
  out.append(padlen, ' ');
  out.push_back('\n');
  return out;
}

Result<Tensor> read(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file) return file.status();
  auto h = parse_header(file->data(), file->size(), path);
  if (!h) return h.status();
  Tensor t = Tensor::uninitialized(h->dtype, h->shape);  // both branches write every byte
  const std::byte* src = file->data() + h->data_offset;
  if (!h->fortran_order || h->shape.size() < 2) {
    if (t.nbytes()) std::memcpy(t.bytes(), src, t.nbytes());
    return t;
  }
  // Fortran order: the first axis is fastest. Walk the C-order destination and gather.
  const std::size_t es = dtype_size(h->dtype);
  const std::size_t rank = h->shape.size();
  std::vector<std::int64_t> fstride(rank);
  std::int64_t s = 1;
  for (std::size_t d = 0; d < rank; ++d) {
    fstride[d] = s;
    s *= h->shape[d];
  }
  std::vector<std::int64_t> idx(rank, 0);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < rank; ++d) off += idx[d] * fstride[d];
    std::memcpy(t.bytes() + static_cast<std::size_t>(i) * es, src + static_cast<std::size_t>(off) * es, es);
    for (std::size_t d = rank; d-- > 0;) {
      if (++idx[d] < h->shape[d]) break;
      idx[d] = 0;
    }
  }
  return t;
}

Status write(const std::string& path, const Tensor& t) {
  if (!descr_of(t.dtype()))
    return Error{path + ": cannot write a " + std::string(dtype_name(t.dtype())) + " tensor to .npy (store bfloat16 as float32)"};
  return fs::write_atomic(path, t.bytes(), t.nbytes(), make_header(t.dtype(), t.shape()));
}

Result<Written> write_hashed(const std::string& path, const Tensor& t) {
  VALIDATE_TRY(write(path, t));
  const std::string header = make_header(t.dtype(), t.shape());
  Sha256 h;
  h.update(header.data(), header.size());
  h.update(t.bytes(), t.nbytes());
  return Written{header.size() + t.nbytes(), h.hex_digest()};
}

Result<MappedArray> MappedArray::open(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file) return file.status();
  auto h = parse_header(file->data(), file->size(), path);
  if (!h) return h.status();
  MappedArray a;
  a.file_ = std::move(*file);
  a.header_ = std::move(*h);
  return a;
}

}  // namespace validate::npy
