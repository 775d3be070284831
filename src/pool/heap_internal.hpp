// What the three parts of the thread heaps' slow paths share: thread_heap.cpp (heaps, remote
// frees, the entry points the inline fast paths call), heap_slabs.cpp (slab setup, carving,
// refills, retirement) and bins.cpp (bin limits, the walks that send a bin's blocks home, and
// shortages: blocks of a class that other heaps' bins keep while this heap takes new slabs).
// Every function runs in the thread owning `h`, on slow paths only; the invariants are listed in
// include/allockit/detail/shared_pool.hpp.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "allockit/detail/shared_pool.hpp"
#include "core/core.hpp"
#include "core/size_class.hpp"

namespace ak::detail {

// --- thread_heap.cpp: heaps and remote frees ---

extern std::atomic<std::uint32_t> g_live_heaps;  // threads holding a heap now

// The entry of h's outgoing batches that frees into slab `s` go to: by the slab's place in its
// region's header table (small slabs' headers are 128 bytes apart) and by its 2 MiB slot (medium
// slabs' headers start their slabs), so neighbouring slabs of either kind take different entries.
inline RemoteBatch& batch_entry(Heap* h, const Slab* s) {
  const std::uintptr_t a = addr(s);
  return h->outgoing[((a / kSlabHeaderBytes) ^ (a >> kMediumSlabShift)) % kRemoteBatches];
}

// Block `p` of slab `s` of another heap, freed by h's thread: into the batch for that slab.
void batch_remote(Heap* h, Slab* s, void* p);
// Hands every batch of h's over to its owner.
void flush_outgoing(Heap* h);

// --- heap_slabs.cpp: slabs ---

extern bool g_checked_slabs;  // debug builds: every slab checked, its blocks never in a bin
extern std::atomic<std::uint32_t> g_class_slabs[kHeapClasses];  // slabs in use per class (stats)

// A slab that is not current is on exactly one of its class's two lists: `avail` (free space)
// or `full` (full, or not yet free enough to rejoin). Doubly linked through prev/next.
inline Slab*& list_of(Heap* h, const Slab* s) {
  return s->full ? h->full[s->size_class] : h->avail[s->size_class];
}

inline void link(Heap* h, Slab* s) {
  Slab*& head = list_of(h, s);
  s->prev = nullptr;
  s->next = head;
  if (head) head->prev = s;
  head = s;
}

inline void unlink(Heap* h, Slab* s) {
  if (s->prev)
    s->prev->next = s->next;
  else
    list_of(h, s) = s->next;
  if (s->next) s->next->prev = s->prev;
  s->prev = s->next = nullptr;
}

// The list a slab keeps its free blocks on while they are home (not in a bin).
inline PoolBlock*& own_list(Slab* s) {
  return s->checked ? s->checked_free : s->free;
}

// Whether slab `s` has nothing left to give: no block home and none left to carve.
inline bool exhausted(const Slab* s) {
  return s->free == nullptr && s->checked_free == nullptr &&
         s->carve.load(std::memory_order_relaxed) == s->end;
}

// `s` becomes its class's current slab in `h`: refills come from it, and it is never retired.
inline void make_current(Heap* h, Slab* s) {
  s->current = true;
  h->current[s->size_class] = s;
}

// The current slab `s` stops being current. The caller puts it on a list or retires it.
inline void stop_current(Heap* h, Slab* s) {
  s->current = false;
  h->current[s->size_class] = nullptr;
}

// A full slab waits on its class's full list until rejoin_at() says enough of it is free again.
inline void mark_full(Heap* h, Slab* s) {
  s->full = true;
  s->settle_at = rejoin_at(s);
  link(h, s);
}

// A new slab of class `cls` owned by h, its header set up (not yet current or listed); null when
// out of memory.
Slab* new_slab(Heap* h, unsigned cls);
// A block of class `cls` from h's current slab: its free blocks (up to half a bin's worth) refill
// the bin, which hands out the first; a checked slab, or a zero_tail one with nothing home, hands
// out one block straight. Null when there is no current slab or it is exhausted. `*untouched` as
// malloc's.
void* take_from_current(Heap* h, unsigned cls, bool* untouched);

// A never-used block of zero_tail slab `s` (pool_take_untouched), setting `*untouched` (if given);
// null when none is left to carve. Costs a slow-path call per fresh block instead of one per page.
inline void* take_untouched(Slab* s, bool* untouched) {
  void* p = pool_take_untouched(s);
  if (p != nullptr && untouched != nullptr) *untouched = true;
  return p;
}

// Gives empty slab `s` back to the slab source.
void retire_slab(Slab* s);
// Debug: clears block `p`'s live bit in checked slab `s`, reporting a double or bad free.
void mark_free(Slab* s, void* p);
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

// Retires the empty slabs settle() kept on h's avail lists.
void retire_kept_empty(Heap* h);
// Out of memory for a new slab: a full slab of class `cls` with any free block (it had not
// gathered enough to rejoin the avail list), off the full list; null if none.
Slab* full_with_free(Heap* h, unsigned cls);

// --- bins.cpp ---

// The most blocks a bin may hold.
inline constexpr std::uint32_t kMaxBinBlocks = 8192;
// What an overflow sends home at most (bins.cpp overflow_sends).
inline constexpr std::uint32_t kMaxSentHome = 512;

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
// Shortages (bins.cpp): a heap needs a new slab of class `cls` while other threads hold heaps,
// whose bins may keep what it needed. Called before it takes one.
void note_shortage(unsigned cls);
extern std::atomic<std::uint16_t> g_shortages;  // shortages noted, over the process (wraps)
// Answers the shortages noted since h last looked: each bin of such a class that holds mostly
// other heaps' blocks sends half of them home (at most kMaxSentHome). One load and compare when
// there is none; h's slow paths call it (`call` names the caller in a report).
void answer_shortages(Heap* h, const char* call);
inline void check_shortages(Heap* h, const char* call) {
  if (g_shortages.load(std::memory_order_relaxed) != h->seen_shortage) [[unlikely]]
    answer_shortages(h, call);
}
// Sends every block in h's bins home (`call` names the caller in a report).
void empty_bins(Heap* h, const char* call);

}  // namespace ak::detail
