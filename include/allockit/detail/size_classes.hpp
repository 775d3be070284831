// The size-class table shared by every size-class pool (public only because the pools' inline fast
// paths need it; src/core/size_class.hpp re-exports it for the library). constexpr: the class of a
// compile-time size costs nothing at run time. Classes: 8..128 in steps of 8, then four classes per
// doubling up to 1 KiB (1.25, 1.5, 1.75 and 2 times a power of two), then five up to
// kMaxPooledSize: 1.125 times a power of two besides. Internal fragmentation: at most 7 bytes up to
// 128, below 25% above it, and at most 12.5% for a power of two and a header of up to an eighth of
// it past 1 KiB (sqlite's 1,024-byte blocks with its 8-byte size and its 4,096-byte pages with
// their 272-byte headers took 1,280 and 5,120 bytes: 142 MiB against glibc's 113 on 300,000 rows in
// memory; 129 with these classes, tcmalloc 131).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace ak::detail {

inline constexpr std::size_t kMaxPooledSize = 16384;  // larger requests bypass the pools
// Stricter alignments bypass the pools (liballockit serves them up to 256 KiB from its medium
// classes). Not 4 KiB: the classes of 4 KiB multiples would lose their slab colours, and slabs of
// 16 KiB blocks starting at their base held 4 blocks instead of 3 (rptest's peak RSS +4%).
inline constexpr std::size_t kMaxPooledAlign = 2048;
// Where the classes of five per doubling start (kFivesFrom, a power of two) and their first class.
inline constexpr std::size_t kFivesFrom = 1024;
inline constexpr unsigned kFirstFive =  // 16 classes to 128, then four per doubling to kFivesFrom
    16 + 4 * (std::countr_zero(kFivesFrom) - 7);
inline constexpr unsigned kClassCount =
    kFirstFive + 5 * (std::countr_zero(kMaxPooledSize) - std::countr_zero(kFivesFrom));
inline constexpr unsigned kNoClass = kClassCount;
// Medium classes continue the table above kMaxPooledSize for liballockit only (the public pools
// stop at kMaxPooledSize): classes kClassCount..kHeapClasses-1, 20 KiB to 256 KiB, four per
// doubling, every size a multiple of 4 KiB.
inline constexpr std::size_t kMaxMediumSize = std::size_t(256) << 10;
inline constexpr unsigned kHeapClasses = kClassCount + 16;

// Largest power of two dividing x (x != 0): the natural alignment of a block size.
constexpr std::size_t natural_alignment(std::size_t x) noexcept {
  return x & (~x + 1);
}

// Block size of class `c` (c < kHeapClasses).
constexpr std::size_t class_size(unsigned c) noexcept {
  if (c < 16) return std::size_t(c + 1) * 8;
  if (c >= kFirstFive && c < kClassCount) {
    const unsigned group = (c - kFirstFive) / 5, sub = (c - kFirstFive) % 5;
    const std::size_t base = kFivesFrom << group;
    return sub == 0 ? base + base / 8 : base + sub * (base / 4);
  }
  // Four per doubling: from 128 below the fives, from kMaxPooledSize above them (medium).
  const bool medium = c >= kClassCount;
  const unsigned first = medium ? kClassCount : 16;
  const unsigned group = (c - first) / 4, sub = (c - first) % 4;
  const std::size_t base = (medium ? kMaxPooledSize : std::size_t(128)) << group;
  return base + (sub + 1) * (base / 4);
}

// Smallest class whose block holds `size` bytes (1 <= size <= kMaxMediumSize). At most three
// branches (liballockit's malloc reads it from a table).
constexpr unsigned class_of(std::size_t size) noexcept {
  if (size <= 128) return unsigned((size + 7) / 8) - 1;
  const unsigned k = unsigned(std::bit_width(size - 1)) - 1;          // floor(log2(size - 1)), >= 7
  const std::size_t past = (size - 1) & ((std::size_t(1) << k) - 1);  // beyond 2^k, less one
  const unsigned quarter = unsigned(past >> (k - 2));
  if (size <= kFivesFrom) return 16 + (k - 7) * 4 + quarter;
  if (size <= kMaxPooledSize)  // the first of five is 2^k + 2^k / 8, then the quarters' ends
    return kFirstFive + (k - std::countr_zero(kFivesFrom)) * 5 + quarter +
           unsigned((past >> (k - 3)) != 0);
  return kClassCount + (k - std::countr_zero(kMaxPooledSize)) * 4 + quarter;
}

// The alignment every block of small class `c` has: the largest power of two dividing its size, at
// most kMaxPooledAlign (a slab's blocks start at a multiple of it, starter blocks too), as
// jemalloc's size classes are aligned. 8 for the 8-byte class. (Medium blocks: medium_class_align.)
constexpr std::size_t class_align(unsigned c) noexcept {
  const std::size_t low = natural_alignment(class_size(c));
  return low < kMaxPooledAlign ? low : kMaxPooledAlign;
}

// Class for a request of `size` bytes aligned to `align`, or kNoClass when the pools cannot serve
// it: the smallest class whose size is a multiple of `align`, so its blocks are aligned to it
// (class_align). An over-aligned small request (128-byte alignment for a cache line pair) takes
// such a class rather than a mapping of its own: 200,000 live 64-byte blocks aligned to 128 took
// a page each, 1.44 s and 807 MiB (jemalloc: 0.02 s, 31 MiB).
// The class comes from a table (kAlignedClasses), not a walk up the classes (33 instructions an
// aligned_alloc of 64 bytes' alignment, against a load).
struct AlignedClasses {
  // of[k][c]: the smallest class at or above small class `c` whose size is a multiple of
  // 2^(k+4) (16 bytes .. kMaxPooledAlign), or kClassCount when none is.
  std::uint8_t of[8][kClassCount];
};
constexpr AlignedClasses make_aligned_classes() noexcept {
  AlignedClasses t{};
  for (unsigned k = 0; k < 8; ++k)
    for (unsigned c = 0; c < kClassCount; ++c) {
      unsigned d = c;
      while (d < kClassCount && class_size(d) % (std::size_t(16) << k) != 0) ++d;
      t.of[k][c] = std::uint8_t(d);
    }
  return t;
}
inline constexpr AlignedClasses kAlignedClasses = make_aligned_classes();
static_assert(std::size_t(16) << 7 == kMaxPooledAlign);

constexpr unsigned class_for(std::size_t size, std::size_t align) noexcept {
  if (size == 0) size = 1;
  if (size > kMaxPooledSize || align > kMaxPooledAlign) return kNoClass;
  const unsigned c = class_of((size + align - 1) & ~(align - 1));
  return align <= 8 ? c : kAlignedClasses.of[std::countr_zero(align) - 4][c];
}

static_assert(class_size(kClassCount - 1) == kMaxPooledSize);
static_assert(class_size(kHeapClasses - 1) == kMaxMediumSize);
static_assert(class_of(kMaxPooledSize + 1) == kClassCount && class_size(kClassCount) == 20480);
static_assert(class_of(kMaxMediumSize) == kHeapClasses - 1);
static_assert(class_of(kMaxPooledSize) == kClassCount - 1);
static_assert(class_of(24) == 2 && class_size(class_of(129)) == 160);
static_assert(class_size(kFirstFive - 1) == kFivesFrom && class_size(kFirstFive) == 1152 &&
              class_of(1032) == kFirstFive && class_size(class_of(4368)) == 4608);
static_assert(class_for(24, 16) == class_of(32));
static_assert(class_align(0) == 8 && class_align(class_of(160)) == 32 &&
              class_align(class_of(384)) == 128);
static_assert(class_size(class_for(64, 128)) == 128 && class_size(class_for(100, 2048)) == 2048);
static_assert(class_align(class_of(4096)) == kMaxPooledAlign && class_for(100, 4096) == kNoClass);
static_assert(class_for(kMaxPooledSize, kMaxPooledAlign) == kClassCount - 1);

}  // namespace ak::detail
