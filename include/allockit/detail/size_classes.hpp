// The size-class table shared by every size-class pool (public only because the pools' inline fast
// paths need it; src/core/size_class.hpp re-exports it for the library). constexpr: the class of a
// compile-time size costs nothing at run time. Classes: 8..128 in steps of 8, then four classes per
// doubling up to kMaxPooledSize. Internal fragmentation: at most 7 bytes up to 128, below 25% above
// it.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace ak::detail {

inline constexpr std::size_t kMaxPooledSize = 16384;  // larger requests bypass the pools
inline constexpr std::size_t kMaxPooledAlign = 64;    // stricter alignments bypass the pools
inline constexpr unsigned kClassCount = 44;
inline constexpr unsigned kNoClass = kClassCount;
// Medium classes continue the table above kMaxPooledSize for liballockit only (the public pools
// stop at kMaxPooledSize): classes kClassCount..kHeapClasses-1, 20 KiB to 256 KiB, four per
// doubling, every size a multiple of 4 KiB.
inline constexpr std::size_t kMaxMediumSize = std::size_t(256) << 10;
inline constexpr unsigned kHeapClasses = kClassCount + 16;

// Block size of class `c` (c < kHeapClasses).
constexpr std::size_t class_size(unsigned c) noexcept {
  if (c < 16) return std::size_t(c + 1) * 8;
  const unsigned group = (c - 16) / 4, sub = (c - 16) % 4;
  const std::size_t base = std::size_t(128) << group;
  return base + (sub + 1) * (base / 4);
}

// Smallest class whose block holds `size` bytes (1 <= size <= kMaxMediumSize). Two branches.
constexpr unsigned class_of(std::size_t size) noexcept {
  if (size <= 128) return unsigned((size + 7) / 8) - 1;
  const unsigned k = unsigned(std::bit_width(size - 1)) - 1;  // floor(log2(size - 1)), >= 7
  return 16 + (k - 7) * 4 + unsigned(((size - 1) >> (k - 2)) & 3);
}

// Class for a request of `size` bytes aligned to `align`, or kNoClass when the pools cannot serve
// it. A block is aligned to `align` when its size is a multiple of it (slab data is 64-aligned).
constexpr unsigned class_for(std::size_t size, std::size_t align) noexcept {
  if (size == 0) size = 1;
  if (size > kMaxPooledSize || align > kMaxPooledAlign) return kNoClass;
  unsigned c = class_of((size + align - 1) & ~(align - 1));
  while (c < kClassCount && class_size(c) % align != 0) ++c;
  return c;
}

static_assert(class_size(kClassCount - 1) == kMaxPooledSize);
static_assert(class_size(kHeapClasses - 1) == kMaxMediumSize);
static_assert(class_of(kMaxPooledSize + 1) == kClassCount && class_size(kClassCount) == 20480);
static_assert(class_of(kMaxMediumSize) == kHeapClasses - 1);
static_assert(class_of(kMaxPooledSize) == kClassCount - 1);
static_assert(class_of(24) == 2 && class_size(class_of(129)) == 160);
static_assert(class_for(24, 16) == class_of(32));

}  // namespace ak::detail
