// Checks of freed-block tags (pool_free_tag in allockit/detail/shared_pool.hpp) where free blocks
// leave a bin: popped on the allocation slow path, walked when a bin sends blocks home, audited at
// exit. A block freed twice sits in a bin twice: its second pop finds no tag (the first cleared
// it), and a walk meets it twice. Each failure is reported and aborts.
#pragma once

#include "allockit/detail/shared_pool.hpp"

namespace ak::detail {

inline constexpr std::uintptr_t kSealedTagBit = 1;  // liballockit's sealed medium blocks
inline constexpr std::uintptr_t kWalkedTagBit = 4;  // a block a bin's walk is visiting

// Reports free block `p`, found without its tag by `call`, and aborts: it was handed out already
// (freed twice) or written after free.
[[noreturn]] void pool_lost_tag(const char* call, const void* p) noexcept;

// Pops a block of class `cls` from this thread's bin (null when empty) after checking its tag.
void* pool_pop_checked(unsigned cls) noexcept;

// What `b`'s second word says beside its tag: 0 or kSealedTagBit for a tagged block,
// | kWalkedTagBit while a walk visits it; anything else is no tag at all.
inline std::uintptr_t tag_bits(const PoolBlock* b) noexcept {
  return (reinterpret_cast<const std::uintptr_t*>(b)[1] ^ pool_free_tag(b)) & ~kSealedTagBit;
}

// Reports free block `b`, whose second word `bits` (beside its tag) a bin's walk in `call` found
// marked already (met twice: a double free) or without a tag, and aborts.
[[noreturn]] void tag_walk_failed(const PoolBlock* b, std::uintptr_t bits,
                                  const char* call) noexcept;

// Marks free block `b` (of a tagged class) as visited by a bin's walk in `call`, after checking
// its tag; reports a block met twice (a double free) or without a tag. Inline: a bin sending
// blocks home visits each, and the call cost a fifth of the walk.
inline void tag_mark_walked(PoolBlock* b, const char* call) noexcept {
  if (const std::uintptr_t bits = tag_bits(b); bits != 0) [[unlikely]]
    tag_walk_failed(b, bits, call);
  reinterpret_cast<std::uintptr_t*>(b)[1] ^= kWalkedTagBit;
}
// Undoes tag_mark_walked.
inline void tag_unmark_walked(PoolBlock* b) noexcept {
  reinterpret_cast<std::uintptr_t*>(b)[1] ^= kWalkedTagBit;
}

// Walks every bin of this thread's heap, checking each block's tag, that no block is in it twice
// and that each link leads to a block; reports the first failure. The blocks stay as they were.
// Cost: one visit per block in the bins (at most a few MiB of them).
void pool_audit_bins() noexcept;

}  // namespace ak::detail
