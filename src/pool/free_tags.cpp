#include "pool/free_tags.hpp"

#include <atomic>

#include "core/core.hpp"
#include "pool/slab_source.hpp"

namespace ak::detail {

namespace {
std::atomic<std::uint64_t> g_walk_rechecks{0};
}  // namespace

void pool_lost_tag(const char* call, const void* p) noexcept {
  bad_pointer(call, "heap corruption (a free block freed twice or written after free)", p);
}

void* pool_pop_checked(unsigned cls) noexcept {
  void* p = pool_pop(cls);
  if (p != nullptr && class_has_tag(cls) && tag_bits(static_cast<PoolBlock*>(p)) != 0)
    pool_lost_tag("allocation", p);
  return p;
}

void note_walk_recheck() noexcept {
  g_walk_rechecks.fetch_add(1, std::memory_order_relaxed);
}

bool on_list(const PoolBlock* head, std::uint32_t max, const PoolBlock* b) noexcept {
  for (std::uint32_t i = 0; head != nullptr && i < max; ++i, head = link_of(head))
    if (head == b) return true;
  return false;
}

void walk_met_twice(const PoolBlock* b, const char* call) noexcept {
  bad_pointer(call, "double free detected (a block twice among the free blocks)", b);
}

void pool_audit_bins() noexcept {
  Heap* h = tl_heap;
  if (!h->is_real) return;
  for (unsigned cls = 0; cls < kHeapClasses; ++cls) {
    const Bin& bin = h->bins[cls];
    if (!class_has_tag(cls) || bin.count == 0) continue;
    const std::uintptr_t key = walk_key(next_walk_epoch(*h));
    // A link is followed only to a block a slab handed out: a link a write after free changed
    // is reported, not followed.
    PoolBlock* b = bin.free;
    for (std::uint32_t n = 0; b != nullptr && n < bin.count; ++n, b = link_of(b)) {
      if (!pool_is_handed_out_block(b))
        bad_pointer("exit", "heap corruption (a free block's link was overwritten)", b);
      if (!tag_visit(b, key, "exit")) {
        note_walk_recheck();
        if (on_list(bin.free, n, b)) walk_met_twice(b, "exit");
      }
    }
  }
}

std::uint64_t pool_walk_rechecks() noexcept {
  return g_walk_rechecks.load(std::memory_order_relaxed);
}

}  // namespace ak::detail
