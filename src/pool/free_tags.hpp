// Checks of freed-block tags (pool_free_tag in allockit/detail/shared_pool.hpp) where free blocks
// leave a bin: popped on the allocation slow path, walked when a bin sends blocks home, audited at
// exit. A block freed twice sits in a bin twice: its second pop finds no tag (the first cleared
// it), and a walk meets it twice. Each failure is reported and aborts.
//
// A walk marks each block it visits with the walk's epoch, a 16-bit number in the top 16 bits of
// the block's second word (the low 48 keep the tag: checks compare those, kTagCheckBits). A block
// met with the running walk's epoch was met before in this walk, or marked by a walk whose epoch
// happens to be the same (65,535 walks of this heap ago, or another heap's); a look where the walk
// sent it tells which. The marks stay: the walk needs no second pass to clear them.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "allockit/detail/shared_pool.hpp"

namespace ak::detail {

inline constexpr std::uintptr_t kSealedTagBit = 1;  // liballockit's sealed medium blocks

// Reports free block `p`, found without its tag by `call`, and aborts: it was handed out already
// (freed twice) or written after free.
[[noreturn]] void pool_lost_tag(const char* call, const void* p) noexcept;

// Pops a block of class `cls` from this thread's bin (null when empty) after checking its tag.
void* pool_pop_checked(unsigned cls) noexcept;

// What the checked bits of `b`'s second word say beside its tag: 0 or kSealedTagBit for a tagged
// block; anything else is no tag at all.
inline std::uintptr_t tag_bits(const PoolBlock* b) noexcept {
  return (reinterpret_cast<const std::uintptr_t*>(b)[1] ^ pool_free_tag(b)) & kTagCheckBits &
         ~kSealedTagBit;
}

// The epoch for h's next walk: never 0, the epoch of a block freed since its last walk.
inline std::uint16_t next_walk_epoch(Heap& h) noexcept {
  if (++h.walk_epoch == 0) h.walk_epoch = 1;
  return h.walk_epoch;
}

// The key a walk with epoch `epoch` compares with: a block's marked word is its address xor the
// key (its tag with the epoch in the top 16 bits, which are the key's own: addresses are below
// 2^47). Computed once per walk.
inline std::uintptr_t walk_key(std::uint16_t epoch) noexcept {
  return pool_free_tag(nullptr) ^ (std::uintptr_t(epoch) << 48);
}
// Visits free block `b` of a tagged class for a walk in `call` with key `key` (walk_key): checks
// its tag (a block without one is reported), then marks it. Returns false, marking nothing, when
// it carries the walk's epoch already; the caller finds out whether it was met before in this
// walk. Inline: a bin sending blocks home visits each.
inline bool tag_visit(PoolBlock* b, std::uintptr_t key, const char* call) noexcept {
  std::uintptr_t w;
  std::memcpy(&w, reinterpret_cast<char*>(b) + 8, sizeof w);
  const std::uintptr_t d = w ^ reinterpret_cast<std::uintptr_t>(b) ^ key;
  if ((d & kTagCheckBits & ~kSealedTagBit) != 0) [[unlikely]]
    pool_lost_tag(call, b);
  if ((d >> 48) == 0) [[unlikely]]
    return false;
  // The top 16 bits alone (bytes 14..15 of a little-endian word): the checked bits and the seal
  // bit stay as they are.
  static_assert(std::endian::native == std::endian::little);
  const auto top = std::uint16_t(key >> 48);
  std::memcpy(reinterpret_cast<char*>(b) + 14, &top, sizeof top);
  return true;
}

// Counts a walk's look at a block that carried the walk's own epoch (pool_walk_rechecks).
void note_walk_recheck() noexcept;

// Returns: whether `b` is among the first `max` blocks of the list starting at `head` (a slow
// path's look, for a walk that met `b` with its own epoch).
bool on_list(const PoolBlock* head, std::uint32_t max, const PoolBlock* b) noexcept;

// Reports free block `b`, met twice among the free blocks by a walk in `call` (a double free), and
// aborts.
[[noreturn]] void walk_met_twice(const PoolBlock* b, const char* call) noexcept;

// Walks every bin of this thread's heap, checking each block's tag, that no block is in it twice
// and that each link leads to a block; reports the first failure. Cost: one visit per block in
// the bins (at most a few MiB of them).
void pool_audit_bins() noexcept;

// Walks that met a block carrying their own epoch, over the process (tests).
std::uint64_t pool_walk_rechecks() noexcept;

}  // namespace ak::detail
