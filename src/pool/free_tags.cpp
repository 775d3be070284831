#include "pool/free_tags.hpp"

#include "core/core.hpp"
#include "pool/slab_source.hpp"

namespace ak::detail {

void pool_lost_tag(const char* call, const void* p) noexcept {
  bad_pointer(call, "heap corruption (a free block freed twice or written after free)", p);
}

void* pool_pop_checked(unsigned cls) noexcept {
  void* p = pool_pop(cls);
  if (p != nullptr && class_has_tag(cls) && tag_bits(static_cast<PoolBlock*>(p)) != 0)
    pool_lost_tag("allocation", p);
  return p;
}

void tag_walk_failed(const PoolBlock* b, std::uintptr_t bits, const char* call) noexcept {
  if (bits == kWalkedTagBit)
    bad_pointer(call, "double free detected (a block twice among the free blocks)", b);
  pool_lost_tag(call, b);
}

void pool_audit_bins() noexcept {
  Heap* h = tl_heap;
  if (!h->is_real) return;
  for (unsigned cls = 0; cls < kHeapClasses; ++cls) {
    const Bin& bin = h->bins[cls];
    if (!class_has_tag(cls) || bin.count == 0) continue;
    // A link is followed only to a block a slab handed out: a link a write after free changed
    // is reported, not followed.
    PoolBlock* b = bin.free;
    std::uint32_t n = 0;
    for (; b != nullptr && n < bin.count; ++n, b = link_of(b)) {
      if (!pool_is_handed_out_block(b))
        bad_pointer("exit", "heap corruption (a free block's link was overwritten)", b);
      tag_mark_walked(b, "exit");
    }
    b = bin.free;
    for (std::uint32_t i = 0; i < n; ++i, b = link_of(b)) tag_unmark_walked(b);
  }
}

}  // namespace ak::detail
