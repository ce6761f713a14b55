#include "validate/core/tensor_hash.hpp"

#include <vector>

#include "validate/core/sha256.hpp"

namespace validate {

std::string tensor_sha256(const Tensor& t) {
  if (t.dtype() == DType::float32) return sha256_hex(t.bytes(), t.nbytes());
  Sha256 h;
  std::vector<float> buf(1 << 14);
  for (std::int64_t i = 0; i < t.numel();) {
    std::size_t n = 0;
    for (; n < buf.size() && i < t.numel(); ++n, ++i) buf[n] = static_cast<float>(t.get(i));
    h.update(buf.data(), n * sizeof(float));
  }
  return h.hex_digest();
}

}  // namespace validate
