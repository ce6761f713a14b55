#pragma once
// Reading op parameters from JSON written by others (case files, `<case>_metadata.json`), shared
// by every op: the type is checked before get<>() (nlohmann converts 1e300 to int64 with a plain
// cast, undefined behaviour found by fuzz_metadata), and shape products are bounded before any
// op multiplies sizes.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include "validate/core/json_io.hpp"
#include "validate/core/result.hpp"

namespace validate::ops {

// Every tensor stays below 2^36 elements and every size below 2^31 (cuDNN and cuBLAS take int).
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 36;
inline constexpr std::int64_t kMaxExtent = 2147483647;

// Product of positive factors, or -1 once it passes kMaxElements or would overflow.
std::int64_t bounded_product(std::initializer_list<std::int64_t> factors);

// Case-file readers: absent key leaves `out` unchanged.
Status read_int(const Json& j, const char* key, std::int64_t& out, const std::string& where);
Status read_pair(const Json& j, const char* key, std::array<std::int64_t, 2>& out, const std::string& where);
Status read_bool(const Json& j, const char* key, bool& out, const std::string& where);
// Rejects keys outside `allowed` ("unknown key 'x'").
Status check_keys(const Json& j, const std::set<std::string>& allowed, const std::string& where);

// Metadata readers: throw nlohmann's other_error (501) on a wrong type; case_from_metadata turns
// every json exception into one "malformed metadata" error naming the file.
std::vector<std::int64_t> int_list(const Json& j, std::size_t n, const char* what);
std::int64_t int_value(const Json& j, const char* what);
std::array<std::int64_t, 2> int_pair(const Json& j, const char* what);

}  // namespace validate::ops
