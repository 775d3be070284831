// ak::BlockPool: an untyped pool of fixed-size blocks. O(1) allocate and deallocate in any order;
// the free list lives inside freed blocks; pages grow geometrically up to a cap. NOT thread-safe:
// one pool, one thread at a time (use the shared pools in pool.hpp across threads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

#include "allockit/config.hpp"
#include "allockit/page_source.hpp"

namespace ak {

struct BlockPoolOptions {
  const char* name = "BlockPool";           // used in error and leak messages
  std::size_t first_page_bytes = 16 << 10;  // first page size; each new page doubles ...
  std::size_t max_page_bytes = 1 << 20;     // ... up to this cap
  bool checked = kDebugBuild;               // detect double/foreign/interior frees (O(log pages))
  PageSource* source = nullptr;             // null: the OS
};

struct BlockPoolStats {
  std::size_t block_size;      // bytes per block after rounding to the alignment
  std::size_t live_blocks;     // allocated and not yet deallocated
  std::size_t pages;           // pages currently held
  std::size_t reserved_bytes;  // bytes mapped for those pages
  std::size_t resident_bytes;  // bytes of those pages resident in RAM (measured with mincore)
};

namespace detail {
struct PoolPage;
struct FreeBlockLink {
  FreeBlockLink* next;
};
}  // namespace detail

class BlockPool {
 public:
  static constexpr std::size_t kMaxBlockSize = std::size_t(1) << 30;
  static constexpr std::size_t kMaxAlignment = std::size_t(1) << 20;

  // Effects: an empty pool of `block_size`-byte blocks aligned to `alignment`. Maps nothing yet.
  // Errors: std::invalid_argument when block_size is 0 or above kMaxBlockSize, or alignment is not
  // a power of two or above kMaxAlignment.
  explicit BlockPool(std::size_t block_size, std::size_t alignment = alignof(std::max_align_t),
                     BlockPoolOptions options = {});
  ~BlockPool();  // returns every page; blocks still live are lost (see ObjectPool for destructors)
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // Returns: an uninitialised block. Errors: std::bad_alloc when the page source fails.
  // Cost: O(1); one branch and two loads when a freed block is available.
  void* allocate() {
    if (void* p = try_allocate()) [[likely]]
      return p;
    throw std::bad_alloc();
  }

  // As allocate(), but returns null instead of throwing. The pool stays usable after a failure.
  void* try_allocate() noexcept {
    if (detail::FreeBlockLink* b = free_) [[likely]] {
      free_ = b->next;
      return b;
    }
    if (bump_ != bump_end_) [[likely]] {
      void* p = bump_;
      bump_ += block_size_;
      return p;
    }
    return allocate_slow();
  }

  // Effects: returns block `p` (from this pool's allocate) to the pool; null is ignored.
  // Errors: a checked pool aborts with a message naming the pool on a double, foreign or interior
  // free; an unchecked pool never scans and aborts only on a misaligned pointer. Cost: O(1).
  void deallocate(void* p) noexcept {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    if ((a & slow_mask_) != 0 || a == 0) [[unlikely]]
      return deallocate_slow(p);
    auto* b = static_cast<detail::FreeBlockLink*>(p);
    b->next = free_;
    free_ = b;
  }

  // As deallocate(p) with no check at all, for callers that know `p` is a live block of this
  // pool and the pool is unchecked (ObjectPool<T, false>). Cost: two loads, two stores.
  void deallocate_unchecked(void* p) noexcept {
    auto* b = static_cast<detail::FreeBlockLink*>(p);
    b->next = free_;
    free_ = b;
  }

  // Effects: forgets every block and returns every page to the source. Live blocks become invalid.
  void release() noexcept;
  // Effects: returns pages holding no live block to the source. Returns: bytes returned.
  // Cost: O(free blocks * log pages).
  std::size_t trim() noexcept;
  // Returns: whether `p` points into a block-carrying page of this pool. Cost: O(log pages).
  bool owns(const void* p) const noexcept;
  // Effects: in a checked pool, aborts unless `p` is a live block of this pool; otherwise nothing.
  void check_live(const void* p) const noexcept {
    if (reinterpret_cast<std::uintptr_t>(p) & slow_mask_) [[unlikely]]
      check_live_slow(p);
  }
  // Effects: calls fn(block, ctx) once for every live block. Cost: O(blocks + free * log pages).
  // Returns false (visiting nothing) if the scratch bitmap cannot be mapped.
  bool for_each_live(void (*fn)(void* block, void* ctx), void* ctx) const noexcept;

  // Returns: the pool's counters. Cost: O(pages + free blocks), plus a mincore call per page: live
  // blocks are derived (carved minus free) so the fast paths keep no counter.
  BlockPoolStats stats() const noexcept;
  // Returns: blocks allocated and not yet deallocated. Cost: O(pages + free blocks).
  std::size_t live_blocks() const noexcept;
  std::size_t block_size() const noexcept { return block_size_; }
  std::size_t alignment() const noexcept { return align_; }
  const char* name() const noexcept { return options_.name; }

 private:
  void* allocate_slow() noexcept;
  void* allocate_checked() noexcept;
  void deallocate_slow(void* p) noexcept;
  detail::FreeBlockLink* free_list() const noexcept { return checked_ ? checked_free_ : free_; }
  char*& cursor() noexcept { return checked_ ? checked_bump_ : bump_; }
  const char* cursor() const noexcept { return checked_ ? checked_bump_ : bump_; }
  void check_live_slow(const void* p) const noexcept;
  [[noreturn]] void fail_misaligned(const void* p) const noexcept;
  [[noreturn]] void fail(const char* what, const void* p) const noexcept;
  bool add_page() noexcept;
  detail::PoolPage* find_page(const void* p) const noexcept;
  std::size_t carved_blocks(const detail::PoolPage* page) const noexcept;

  // Hot fields first: the fast path touches only this cache line. A checked pool keeps free_ null
  // and bump_ == bump_end_ so allocation always misses into the slow path, and sets every bit of
  // slow_mask_ so every free does too; its real free list and bump range live below.
  detail::FreeBlockLink* free_ = nullptr;
  char* bump_ = nullptr;
  char* bump_end_ = nullptr;
  std::uintptr_t slow_mask_;  // align_ - 1, or ~0 when checked
  std::size_t block_size_;
  std::size_t align_;
  bool checked_;
  // Cold state.
  detail::FreeBlockLink* checked_free_ = nullptr;
  char* checked_bump_ = nullptr;
  char* checked_end_ = nullptr;
  BlockPoolOptions options_;
  PageSource* source_;
  detail::PoolPage** dir_ = nullptr;  // pages sorted by address, for lookups; mapped from source_
  std::size_t dir_len_ = 0, dir_cap_ = 0;
  std::size_t next_page_bytes_;
  detail::PoolPage* bump_page_ = nullptr;  // the page bump_ carves from
};

}  // namespace ak
