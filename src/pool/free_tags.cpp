#include "pool/free_tags.hpp"

#include "core/core.hpp"
#include "pool/slab_source.hpp"

namespace ak::detail {

namespace {

constexpr std::uintptr_t kSealedBit = 1;  // liballockit's sealed medium blocks
constexpr std::uintptr_t kWalkedBit = 4;

// What `b`'s second word says beside its tag: 0 or kSealedBit for a tagged block, | kWalkedBit
// while a walk visits it; anything else is no tag at all.
std::uintptr_t tag_bits(const PoolBlock* b) {
  return reinterpret_cast<const std::uintptr_t*>(b)[1] ^ pool_free_tag(b);
}

[[noreturn]] void lost_tag(const char* call, const void* b) {
  bad_pointer(call, "heap corruption (a free block freed twice or written after free)", b);
}

[[noreturn]] void met_twice(const void* b) {
  bad_pointer("free()", "double free detected (a block twice among the free blocks)", b);
}

}  // namespace

bool class_is_tagged(unsigned cls) noexcept {
  return class_size(cls) >= 16;
}

void* pool_pop_checked(unsigned cls) noexcept {
  void* p = pool_pop(cls);
  if (p != nullptr && class_is_tagged(cls) &&
      (tag_bits(static_cast<PoolBlock*>(p)) & ~kSealedBit) != 0)
    lost_tag("allocation", p);
  return p;
}

void tag_mark_walked(PoolBlock* b) noexcept {
  const std::uintptr_t bits = tag_bits(b) & ~kSealedBit;
  if (bits == kWalkedBit) met_twice(b);
  if (bits != 0) lost_tag("free()", b);
  reinterpret_cast<std::uintptr_t*>(b)[1] ^= kWalkedBit;
}

void pool_audit_bins() noexcept {
  Heap* h = tl_heap;
  if (!h->is_real) return;
  for (unsigned cls = 0; cls < kHeapClasses; ++cls) {
    const Bin& bin = h->bins[cls];
    if (!class_is_tagged(cls) || bin.count == 0) continue;
    // A link is followed only to a block a slab handed out: a link a write after free changed
    // is reported, not followed.
    PoolBlock* b = bin.free;
    std::uint32_t n = 0;
    for (; b != nullptr && n < bin.count; ++n, b = link_of(b)) {
      if ((!in_pool_region(b) && !in_medium_region(b)) ||
          (!slab_of_any(b)->starter && !pool_is_carved_block(slab_of_any(b), b)))
        bad_pointer("exit", "heap corruption (a free block's link was overwritten)", b);
      tag_mark_walked(b);
    }
    b = bin.free;
    for (std::uint32_t i = 0; i < n; ++i, b = link_of(b)) tag_unmark_walked(b);
  }
}

}  // namespace ak::detail
