// The large-block cache's index (range_index.hpp): size bins as doubly linked lists of slots with
// a bitmap of the bins in use, and a boundary map with linear probing and backward-shift
// deletion (no tombstones), kept at most a quarter full.
#include "malloc/range_index.hpp"

#include <bit>
#include <new>

namespace ak::detail {

std::size_t RangeIndex::bytes_for(std::size_t cap) noexcept {
  return sizeof(RangeIndex) + cap * sizeof(Link) + 4 * cap * sizeof(std::uint64_t);
}

RangeIndex* RangeIndex::create(void* memory, std::size_t cap) noexcept {
  auto* x = ::new (memory) RangeIndex;
  for (auto& kind : x->head_)
    for (std::uint32_t& h : kind) h = kNone;
  for (auto& kind : x->nonempty_)
    for (std::uint64_t& w : kind) w = 0;
  x->links_ = reinterpret_cast<Link*>(x + 1);
  x->map_ = reinterpret_cast<std::uint64_t*>(x->links_ + cap);
  x->map_mask_ = 4 * cap - 1;
  x->shift_ = 64 - unsigned(std::countr_zero(4 * cap));
  return x;
}

unsigned RangeIndex::bin_of(std::size_t bytes) noexcept {
  const std::size_t pages = bytes >> 12;
  if (pages < 4) return unsigned(pages);                   // 0..3: one bin each
  const unsigned k = unsigned(std::bit_width(pages)) - 1;  // >= 2
  return 4 * (k - 1) + unsigned((pages >> (k - 2)) & 3);
}

unsigned RangeIndex::next_bin(bool zero, unsigned from) const noexcept {
  for (unsigned w = from / 64; w < kBins / 64; ++w) {
    std::uint64_t bits = nonempty_[zero][w];
    if (w == from / 64) bits &= ~std::uint64_t(0) << (from % 64);
    if (bits != 0) return w * 64 + unsigned(std::countr_zero(bits));
  }
  return kBins;
}

void RangeIndex::add(std::uint32_t slot, const char* base, std::size_t bytes, bool zero) noexcept {
  const unsigned b = bin_of(bytes);
  const std::uint32_t old = head_[zero][b];
  links_[slot] = Link{kNone, old};
  if (old != kNone) links_[old].prev = slot;
  head_[zero][b] = slot;
  nonempty_[zero][b / 64] |= std::uint64_t(1) << (b % 64);
  map_insert(key(base, false), slot);
  map_insert(key(base + bytes, true), slot);
}

void RangeIndex::remove(std::uint32_t slot, const char* base, std::size_t bytes,
                        bool zero) noexcept {
  const unsigned b = bin_of(bytes);
  const Link l = links_[slot];
  if (l.prev != kNone)
    links_[l.prev].next = l.next;
  else
    head_[zero][b] = l.next;
  if (l.next != kNone) links_[l.next].prev = l.prev;
  if (head_[zero][b] == kNone) nonempty_[zero][b / 64] &= ~(std::uint64_t(1) << (b % 64));
  map_erase(key(base, false));
  map_erase(key(base + bytes, true));
}

std::uint32_t RangeIndex::find(std::uint64_t k) const noexcept {
  for (std::size_t i = home(k);; i = (i + 1) & map_mask_) {
    const std::uint64_t e = map_[i];
    if (e == 0) return kNone;
    if (e >> kSlotBits == k) return std::uint32_t(e & ((1u << kSlotBits) - 1));
  }
}

void RangeIndex::map_insert(std::uint64_t k, std::uint32_t slot) noexcept {
  std::size_t i = home(k);
  while (map_[i] != 0) i = (i + 1) & map_mask_;
  map_[i] = k << kSlotBits | slot;
}

void RangeIndex::map_erase(std::uint64_t k) noexcept {
  std::size_t i = home(k);
  while (map_[i] >> kSlotBits != k) {
    if (map_[i] == 0) return;  // not mapped
    i = (i + 1) & map_mask_;
  }
  // Backward shift: move up each later entry of the run that may sit at or before the hole.
  for (std::size_t j = (i + 1) & map_mask_; map_[j] != 0; j = (j + 1) & map_mask_) {
    const std::size_t h = home(map_[j] >> kSlotBits);
    // Entry j may fill hole i when its home is not in the cyclic range (i, j].
    if (((j - h) & map_mask_) >= ((j - i) & map_mask_)) {
      map_[i] = map_[j];
      i = j;
    }
  }
  map_[i] = 0;
}

}  // namespace ak::detail
