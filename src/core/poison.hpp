// Marking memory as off limits for debug modes: ASan poisoning in ASan builds (so any access is
// reported), otherwise a 0xDD fill (so stale reads show a recognisable pattern). Never allocates.
#pragma once

#include <cstddef>
#include <cstring>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define AK_ASAN 1
#else
#define AK_ASAN 0
#endif

namespace ak::detail {

inline constexpr unsigned char kPoisonByte = 0xdd;

inline void poison(void* p, std::size_t n) noexcept {
  if (n == 0) return;
#if AK_ASAN
  ASAN_POISON_MEMORY_REGION(p, n);
#else
  std::memset(p, kPoisonByte, n);
#endif
}

// Makes memory usable again; only ASan needs it.
inline void unpoison(void* p, std::size_t n) noexcept {
#if AK_ASAN
  ASAN_UNPOISON_MEMORY_REGION(p, n);
#else
  (void)p, (void)n;
#endif
}

}  // namespace ak::detail
