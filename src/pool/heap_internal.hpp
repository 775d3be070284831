// What the two halves of the thread heaps' slow paths share: thread_heap.cpp (heaps, slabs,
// remote frees, the entry points the inline fast paths call) and bins.cpp (bin limits and the
// walks that send a bin's blocks home). Every function runs in the thread owning `h`, on slow
// paths only; the invariants are listed in include/allockit/detail/shared_pool.hpp.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "allockit/detail/shared_pool.hpp"
#include "core/core.hpp"
#include "core/size_class.hpp"

namespace ak::detail {

// --- thread_heap.cpp ---

extern std::atomic<std::uint32_t> g_live_heaps;  // threads holding a heap now

// A slab of h that is not current and whose use count just reached its `settle_at`: it is empty
// (retired, or kept as its class's one empty slab), or full with enough free to rejoin the avail
// list.
void settle(Heap* h, Slab* s);

// `n` blocks of slab `s` of `h` came home: a slab that is not current settles if its count
// crossed `settle_at`.
inline void after_frees(Heap* h, Slab* s, std::uint32_t n) {
  const std::uint32_t before = s->used;
  s->used -= n;
  if (!s->current && before > s->settle_at && s->used <= s->settle_at) settle(h, s);
}

// The entry of h's outgoing batches that frees into slab `s` go to.
inline RemoteBatch& batch_entry(Heap* h, const Slab* s) {
  return h->outgoing[(addr(s) >> kSlabShift) % kRemoteBatches];
}

// Block `p` of slab `s` of another heap, freed by h's thread: into the batch for that slab.
void batch_remote(Heap* h, Slab* s, void* p);

// --- bins.cpp ---

// The most blocks a bin may hold.
inline constexpr std::uint32_t kMaxBinBlocks = 8192;

// A bin's first limit: about 16 KiB of blocks, at least 8 and at most 64; a medium class starts
// at one block.
struct StartLimits {
  std::uint32_t of[kHeapClasses];
  constexpr StartLimits() : of{} {
    for (unsigned c = 0; c < kHeapClasses; ++c)
      of[c] = c >= kClassCount
                  ? 1
                  : std::uint32_t(std::clamp<std::size_t>((16 << 10) / class_size(c), 8, 64));
  }
};
inline constexpr StartLimits kStartLimits;
inline std::uint32_t start_limit(unsigned cls) {
  return kStartLimits.of[cls];
}

// The limit a bin of class `cls` closed with `doublings` opens at.
inline std::uint32_t reopen_limit(unsigned cls, std::uint8_t doublings) {
  return std::min(start_limit(cls) << doublings, kMaxBinBlocks);
}

// The limit of h's bin of class `cls`, or, closed, the one it opens at.
inline std::uint32_t limit_of(const Heap* h, unsigned cls) {
  const std::uint32_t limit = h->bins[cls].limit;
  return limit != 0 ? limit : reopen_limit(cls, h->bin_overflows[cls]);
}

// Opens h's bin of class `cls` if closed: an allocation found it empty.
inline void open_bin(Heap* h, unsigned cls) {
  if (h->bins[cls].limit != 0) return;
  h->bins[cls].limit = reopen_limit(cls, h->bin_overflows[cls]);
  h->bin_overflows[cls] = 0;
}
// The bin of class `cls` ran empty: its limit doubles, within the heap's budget.
void grow_limit(Heap* h, unsigned cls);
// Closes h's bin of class `cls` for a run of frees: its blocks go home, its limit reads 0.
void close_bin(Heap* h, unsigned cls);
// h's bin of class `cls` is full on a free: makes room, and returns whether it closes instead
// (`own_run`: the freed block is h's and its caller checks tags while a bin is closed).
bool overflow(Heap* h, unsigned cls, bool own_run);
// Sends every block in h's bins home (`call` names the caller in a report).
void empty_bins(Heap* h, const char* call);

}  // namespace ak::detail
