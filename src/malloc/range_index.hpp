// An index over the large-block cache's slots once it holds more ranges than its inline slots
// (large_cache.hpp): size bins per kind (resident, known zero) for best fit, and a map of range
// boundaries (where each range starts and where it ends) for merges and in-place growth. Without
// it every request and every free scanned all the ranges: with 2,000 live blocks of 1-3 MiB
// churned at random, 37% of the time. Slots are the cache's array indices; the cache calls add()
// and remove() around every change of a range's start, size or kind. Not thread-safe: the cache's
// caller holds its lock.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ak::detail {

class RangeIndex {
 public:
  static constexpr std::uint32_t kNone = ~std::uint32_t(0);
  static constexpr unsigned kBins = 192;  // four per doubling of pages, up to 2^48 bytes

  // The bytes an index over `cap` slots needs, itself included.
  static std::size_t bytes_for(std::size_t cap) noexcept;
  // An empty index over `cap` slots (a power of two, at most 2^16) laid out in `memory`:
  // bytes_for(cap) zero bytes, 8-byte aligned.
  static RangeIndex* create(void* memory, std::size_t cap) noexcept;

  void add(std::uint32_t slot, const char* base, std::size_t bytes, bool zero) noexcept;
  void remove(std::uint32_t slot, const char* base, std::size_t bytes, bool zero) noexcept;

  // The slot of the range starting at `p`, or ending at `p`; kNone when none does.
  std::uint32_t starting_at(const char* p) const noexcept { return find(key(p, false)); }
  std::uint32_t ending_at(const char* p) const noexcept { return find(key(p, true)); }

  // Size bins: every range of bin b is at least as big as every range of bin b - 1, and a
  // request of `bytes` needs bin_of(bytes) or one above it.
  static unsigned bin_of(std::size_t bytes) noexcept;
  // The first bin from `from` holding a range of kind `zero`, or kBins.
  unsigned next_bin(bool zero, unsigned from) const noexcept;
  // The ranges of a bin: first(), then next() until kNone.
  std::uint32_t first(bool zero, unsigned bin) const noexcept { return head_[zero][bin]; }
  std::uint32_t next(std::uint32_t slot) const noexcept { return links_[slot].next; }

 private:
  struct Link {
    std::uint32_t prev, next;
  };
  // A boundary's key: its page number and whether a range ends there (else starts there).
  static std::uint64_t key(const char* p, bool end) noexcept {
    return (reinterpret_cast<std::uintptr_t>(p) >> 12) << 1 | (end ? 1 : 0);
  }
  // The map's entries: key << kSlotBits | slot, 0 for empty; open addressing, linear probing.
  static constexpr unsigned kSlotBits = 16;
  std::size_t home(std::uint64_t k) const noexcept {
    return std::size_t((k * 0x9e3779b97f4a7c15ull) >> shift_);
  }
  std::uint32_t find(std::uint64_t k) const noexcept;
  void map_insert(std::uint64_t k, std::uint32_t slot) noexcept;
  void map_erase(std::uint64_t k) noexcept;

  std::uint32_t head_[2][kBins];
  std::uint64_t nonempty_[2][kBins / 64];
  Link* links_ = nullptr;
  std::uint64_t* map_ = nullptr;
  std::size_t map_mask_ = 0;
  unsigned shift_ = 64;
};

}  // namespace ak::detail
