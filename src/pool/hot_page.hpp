// The hot page: the pool layer's state that a process writes first, on one zeroed page.
//
// A page of it costs a page fault when first written (about 2.2 us here) and, after a fork, a
// copy-on-write fault in the parent and in the child when either writes it again. The first heap,
// the starter slab's counters and its block map were on three pages (a relocated .data page, a
// .bss page, the first page of the starter slab): a shell's fork cycle that allocated wrote all
// three on both sides. Here they share one page, all zero until written, so none is written at
// load either. Cost: the starter's blocks are limited to what its map here can cover
// (kStarterBlockBytes).
#pragma once

#include "allockit/detail/shared_pool.hpp"
#include "pool/starter_slab.hpp"

namespace ak::detail {

// In .lbss (AK_LARGE_ZEROED): its page alignment would otherwise align all of .bss and move the
// small zeroed globals off the page they share with .data.
struct alignas(4096) HotPage {
  Heap first_heap;  // the first thread's heap (thread_heap.cpp)
  StarterState starter;
};
static_assert(sizeof(HotPage) == 4096, "the hot page's state fits one page");

extern constinit HotPage g_pool_hot;

}  // namespace ak::detail
