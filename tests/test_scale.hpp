// Scales randomized and stress test sizes down under sanitizers, which run 5-20x slower.
#pragma once

#include <cstddef>

namespace ak::test {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr std::size_t kScale = 10;
#else
inline constexpr std::size_t kScale = 1;
#endif
constexpr std::size_t scaled(std::size_t n) {
  return n / kScale;
}
}  // namespace ak::test
