#pragma once
// Element types the harness knows, and exact round-to-nearest-even conversions between them.
// bfloat16 and float16 are handled bit-exactly here rather than through a compiler extension so
// results are identical on every compiler and CPU.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace validate {

enum class DType { float32, bfloat16, float16, float64 };

std::string_view dtype_name(DType d);
std::optional<DType> parse_dtype(std::string_view name);
std::size_t dtype_size(DType d);

// How a logical dtype is stored in a reference set: bfloat16 as float32 (exactly representable),
// float16 as float16, float32 and float64 as themselves.
DType storage_dtype(DType logical);

std::uint16_t float_to_bfloat16_bits(float x);  // round to nearest even, NaN stays NaN
float bfloat16_bits_to_float(std::uint16_t bits);
std::uint16_t float_to_float16_bits(float x);  // round to nearest even, overflow -> inf
float float16_bits_to_float(std::uint16_t bits);

// The float32 value nearest to x that is representable in `logical` (identity for float32/64).
float round_to_dtype(float x, DType logical);
// The value of `logical` nearest to x, rounded once from double (ties to even; overflow -> inf).
// Going through float32 first would round twice and can land one ULP off at a tie.
double round_to_dtype(double x, DType logical);
// round_to_dtype(p[i], bfloat16) for every i, in place: a branch-free loop the compiler vectorizes
// (the call per element was 4% of generate's CPU time on the bfloat16 sweep). Same bits.
void round_to_bfloat16_inplace(float* p, std::size_t n);

// float16 storage that must never understate a value (error-bound scales, docs/formats.md):
// out[i] = the float16 nearest to in[i] * multiplier in the direction of +infinity (the smallest
// float16 >= it; +inf above 65504), NaN -> 0x7e00 with its sign. `multiplier` must be a power of
// two, so the product is exact wherever it matters. in and out must not overlap. Branch-free:
// the compiler vectorizes both loops.
void float_to_float16_up(const float* in, std::uint16_t* out, std::size_t n, float multiplier = 1);
// out[i] = float16_bits_to_float(in[i]) (exact); in and out must not overlap.
void float16_to_float(const std::uint16_t* in, float* out, std::size_t n);

}  // namespace validate
