// Intrusive singly linked free list: the link lives in the first word of each freed block, so a
// free list costs no memory of its own. Owner-thread only; cross-thread lists use atomics
// elsewhere.
#pragma once

namespace ak::detail {

struct FreeBlock {
  FreeBlock* next;
};

// Push a block: two stores, no branch.
inline void push_block(FreeBlock*& head, void* p) noexcept {
  auto* b = static_cast<FreeBlock*>(p);
  b->next = head;
  head = b;
}

// Pop a block, or null when empty: one branch, two loads.
inline void* pop_block(FreeBlock*& head) noexcept {
  FreeBlock* b = head;
  if (b) head = b->next;
  return b;
}

}  // namespace ak::detail
