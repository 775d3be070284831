// Sizes of randomized and stress tests: scaled down under sanitizers, which run 5-20x slower,
// and up by ALLOCKIT_TEST_SOAK=N (an integer, default 1) for the long runs of `make soak`.
#pragma once

#include <cstddef>
#include <cstdlib>

namespace ak::test {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr std::size_t kScale = 10;
#else
inline constexpr std::size_t kScale = 1;
#endif

inline std::size_t soak_factor() {
  static const std::size_t factor = [] {
    const char* s = std::getenv("ALLOCKIT_TEST_SOAK");
    const long n = s ? std::strtol(s, nullptr, 10) : 1;
    return n > 0 ? std::size_t(n) : std::size_t(1);
  }();
  return factor;
}

inline std::size_t scaled(std::size_t n) {
  return n * soak_factor() / kScale;
}
}  // namespace ak::test
