#pragma once
// Internal to the permute engine: the simplified gather (Plan), an odometer over some of its axes,
// the thread split, and the small platform helpers the kernels share.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define VALIDATE_LAYOUT_X86 1
#else
#define VALIDATE_LAYOUT_X86 0
#endif

namespace validate::layout::detail {

// Words of 1, 2, 4, 8 bytes that may alias anything (the buffers hold float, bfloat16 bits, ...)
// and sit at any address (a user's buffer after a 10-byte header): packed + may_alias makes
// both legal, and x86 loads them with ordinary moves.
#define VALIDATE_WORD(name, type)                                   \
  struct __attribute__((packed, may_alias)) name {                  \
    type v;                                                         \
  };                                                                \
  static_assert(sizeof(name) == sizeof(type) && alignof(name) == 1)
VALIDATE_WORD(Word1, std::uint8_t);
VALIDATE_WORD(Word2, std::uint16_t);
VALIDATE_WORD(Word4, std::uint32_t);
VALIDATE_WORD(Word8, std::uint64_t);
#undef VALIDATE_WORD

#if VALIDATE_LAYOUT_X86
// VALIDATE_LAYOUT_ISA=generic turns the register transposes off, so the tests check the scalar
// kernels on machines that would otherwise never run them.
inline bool have_avx2() {
  static const bool yes = [] {
    const char* e = std::getenv("VALIDATE_LAYOUT_ISA");
    return !(e && std::string_view(e) == "generic") && __builtin_cpu_supports("avx2");
  }();
  return yes;
}
#endif

// Asks for the first line of `rows` rows `stride` elements apart (the next tile of a walk).
template <class T>
inline void prefetch_rows(const T* p, std::int64_t rows, std::int64_t stride) {
#if VALIDATE_LAYOUT_X86
  for (std::int64_t j = 0; j < rows; ++j) _mm_prefetch(reinterpret_cast<const char*>(p + j * stride), _MM_HINT_T0);
#else
  (void)p, (void)rows, (void)stride;
#endif
}

inline void store_fence() {
#if VALIDATE_LAYOUT_X86
  _mm_sfence();
#endif
}

struct Plan {
  std::vector<std::int64_t> n, s, d;  // simplified destination shape, source strides, destination strides
  std::int64_t offset = 0;
  // Destination far larger than the caches: whole destination lines are written with non-temporal
  // stores, which skip the read-for-ownership of a normal store (a third of the memory traffic).
  bool stream = false;
};

// Odometer over a subset of the plan's axes, tracking the source and destination offsets.
struct Outer {
  std::vector<std::int64_t> n, s, d, idx;
  std::int64_t src = 0, dst = 0;

  Outer(const Plan& p, const std::vector<std::size_t>& axes) {
    for (auto a : axes) {
      n.push_back(p.n[a]);
      s.push_back(p.s[a]);
      d.push_back(p.d[a]);
    }
    idx.assign(n.size(), 0);
  }
  std::int64_t count() const {
    std::int64_t c = 1;
    for (auto v : n) c *= v;
    return c;
  }
  void seek(std::int64_t u) {
    src = dst = 0;
    for (std::size_t a = n.size(); a-- > 0;) {
      idx[a] = u % n[a];
      u /= n[a];
      src += idx[a] * s[a];
      dst += idx[a] * d[a];
    }
  }
  void next() {
    for (std::size_t a = n.size(); a-- > 0;) {
      src += s[a];
      dst += d[a];
      if (++idx[a] < n[a]) return;
      src -= s[a] * n[a];
      dst -= d[a] * n[a];
      idx[a] = 0;
    }
  }
};

// Runs fn(begin, end) over [0, units) split into `threads` contiguous ranges, the first on the
// calling thread. If a thread cannot be started the caller does that range itself: a conversion
// never fails for want of a thread.
template <class Fn>
void parallel_units(std::int64_t units, int threads, const Fn& fn) {
  const auto t_count = static_cast<int>(std::min<std::int64_t>(threads, units));
  if (t_count <= 1) {
    fn(std::int64_t{0}, units);
    return;
  }
  std::vector<std::thread> pool;
  std::vector<std::pair<std::int64_t, std::int64_t>> inline_ranges;
  for (int t = 1; t < t_count; ++t) {
    const std::int64_t b = units * t / t_count, e = units * (t + 1) / t_count;
    try {
      pool.emplace_back([&fn, b, e] { fn(b, e); });
    } catch (const std::system_error&) {
      inline_ranges.emplace_back(b, e);
    }
  }
  fn(std::int64_t{0}, units / t_count);
  for (auto [b, e] : inline_ranges) fn(b, e);
  for (auto& th : pool) th.join();
}

}  // namespace validate::layout::detail
