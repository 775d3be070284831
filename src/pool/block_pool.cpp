// ak::BlockPool slow paths: page growth, the sorted page directory, checked frees, trim and the
// live-block walk. Page layout: [PoolPage][debug bitmap][pad to alignment][blocks ...].
// Single-threaded by contract (see block_pool.hpp).
#include "allockit/block_pool.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "os/os.hpp"

namespace ak {
namespace detail {

struct PoolPage {
  std::size_t bytes;     // mapped size of the page
  char* first;           // first block
  char* limit;           // end of the last whole block
  std::size_t capacity;  // blocks in the page
  std::uint64_t* live;   // checked pools: one bit per block, set while allocated; else null
  std::size_t scratch;   // trim: free blocks counted in this page
};

namespace {

std::size_t checked_block_size(std::size_t size, std::size_t align) {
  if (size == 0) throw std::invalid_argument("ak::BlockPool: block size must be non-zero");
  if (size > BlockPool::kMaxBlockSize)
    throw std::invalid_argument("ak::BlockPool: block size exceeds BlockPool::kMaxBlockSize");
  if (!is_pow2(align))
    throw std::invalid_argument("ak::BlockPool: alignment must be a power of two");
  if (align > BlockPool::kMaxAlignment)
    throw std::invalid_argument("ak::BlockPool: alignment exceeds BlockPool::kMaxAlignment");
  align = std::max(align, alignof(FreeBlockLink));
  return align_up(std::max(size, sizeof(FreeBlockLink)), align);
}

bool bit_get(const std::uint64_t* bits, std::size_t i) {
  return (bits[i / 64] >> (i % 64)) & 1;
}
void bit_set(std::uint64_t* bits, std::size_t i) {
  bits[i / 64] |= std::uint64_t(1) << (i % 64);
}
void bit_clear(std::uint64_t* bits, std::size_t i) {
  bits[i / 64] &= ~(std::uint64_t(1) << (i % 64));
}

}  // namespace
}  // namespace detail

using detail::PoolPage;

BlockPool::BlockPool(std::size_t block_size, std::size_t alignment, BlockPoolOptions options)
    : block_size_(detail::checked_block_size(block_size, alignment)),
      align_(std::max(alignment, alignof(detail::FreeBlockLink))),
      checked_(options.checked),
      options_(options),
      source_(options.source ? options.source : &os_page_source()) {
  const std::size_t page = os::page_size();
  options_.first_page_bytes = detail::align_up(std::max(options.first_page_bytes, page), page);
  options_.max_page_bytes = std::max(options_.first_page_bytes, options.max_page_bytes);
  next_page_bytes_ = options_.first_page_bytes;
  slow_mask_ = checked_ ? ~std::uintptr_t(0) : std::uintptr_t(align_ - 1);
}

BlockPool::~BlockPool() {
  release();
}

// ---------------------------------------------------------------------------------------------
// Page growth and the page directory
// ---------------------------------------------------------------------------------------------

bool BlockPool::add_page() noexcept {
  const std::size_t os_page = os::page_size();
  const std::size_t header = detail::align_up(sizeof(PoolPage), 16);
  // Room for at least one block even when it exceeds the page cap.
  std::size_t min_bytes = header + align_ + block_size_ + (checked_ ? 8 : 0);
  std::size_t bytes = detail::align_up(std::max(next_page_bytes_, min_bytes), os_page);
  const std::size_t map_align = std::max(os_page, align_);
  auto* base = static_cast<char*>(source_->map(bytes, map_align));
  if (base == nullptr) return false;

  // Grow the directory first so a failure there leaves no orphaned page.
  if (dir_len_ == dir_cap_) {
    const std::size_t cap = dir_cap_ ? dir_cap_ * 2 : os_page / sizeof(PoolPage*);
    auto** dir = static_cast<PoolPage**>(source_->map(cap * sizeof(PoolPage*), os_page));
    if (dir == nullptr) {
      source_->unmap(base, bytes);
      return false;
    }
    if (dir_) {
      std::memcpy(dir, dir_, dir_len_ * sizeof(PoolPage*));
      source_->unmap(dir_, dir_cap_ * sizeof(PoolPage*));
    }
    dir_ = dir;
    dir_cap_ = cap;
  }

  auto* page = reinterpret_cast<PoolPage*>(base);
  std::size_t capacity = (bytes - header - align_) / block_size_;
  if (checked_) capacity = (bytes - header - align_ - 8) * 8 / (8 * block_size_ + 1);
  const std::size_t bitmap_bytes = checked_ ? detail::align_up((capacity + 63) / 64 * 8, 8) : 0;
  char* first =
      reinterpret_cast<char*>(detail::align_up(detail::addr(base + header + bitmap_bytes), align_));
  while (first + capacity * block_size_ > base + bytes) --capacity;
  *page = PoolPage{bytes,
                   first,
                   first + capacity * block_size_,
                   capacity,
                   checked_ ? reinterpret_cast<std::uint64_t*>(base + header) : nullptr,
                   0};

  PoolPage** pos = std::upper_bound(dir_, dir_ + dir_len_, page);
  std::memmove(pos + 1, pos, std::size_t(dir_ + dir_len_ - pos) * sizeof(PoolPage*));
  *pos = page;
  ++dir_len_;

  bump_page_ = page;
  cursor() = page->first;
  (checked_ ? checked_end_ : bump_end_) = page->limit;
  next_page_bytes_ = std::min(next_page_bytes_ * 2, options_.max_page_bytes);
  return true;
}

PoolPage* BlockPool::find_page(const void* p) const noexcept {
  auto* c = static_cast<const char*>(p);
  // Last page whose start is <= p.
  PoolPage** it = std::upper_bound(dir_, dir_ + dir_len_, c, [](const char* key, PoolPage* pg) {
    return key < reinterpret_cast<const char*>(pg);
  });
  if (it == dir_) return nullptr;
  PoolPage* page = *(it - 1);
  return c < reinterpret_cast<const char*>(page) + page->bytes ? page : nullptr;
}

std::size_t BlockPool::carved_blocks(const PoolPage* page) const noexcept {
  if (page == bump_page_) return std::size_t(cursor() - page->first) / block_size_;
  return page->capacity;
}

void* BlockPool::allocate_slow() noexcept {
  if (checked_) return allocate_checked();
  if (!add_page()) return nullptr;
  void* p = bump_;
  bump_ += block_size_;
  return p;
}

// ---------------------------------------------------------------------------------------------
// Checked mode: every block's state is one bit in its page
// ---------------------------------------------------------------------------------------------

void BlockPool::fail(const char* what, const void* p) const noexcept {
  detail::Message()
      .str("allockit: ")
      .str(what)
      .str(" of ")
      .ptr(p)
      .str(" in pool '")
      .str(options_.name)
      .str("'")
      .fail();
}

void BlockPool::fail_misaligned(const void* p) const noexcept {
  fail("misaligned free (not a block of this pool)", p);
}

void* BlockPool::allocate_checked() noexcept {
  void* p = nullptr;
  if (checked_free_) {
    p = checked_free_;
    checked_free_ = checked_free_->next;
  } else if (checked_bump_ != checked_end_ || add_page()) {
    p = checked_bump_;
    checked_bump_ += block_size_;
  } else {
    return nullptr;
  }
  PoolPage* page = find_page(p);
  AK_CHECK(page != nullptr, "free list corrupted: block outside every page");
  const std::size_t index = std::size_t(static_cast<char*>(p) - page->first) / block_size_;
  if (detail::bit_get(page->live, index)) fail("free list corrupted: block handed out twice", p);
  detail::bit_set(page->live, index);
  return p;
}

void BlockPool::check_live_slow(const void* p) const noexcept {
  if (p == nullptr) return;
  if (!checked_) fail_misaligned(p);
  PoolPage* page = find_page(p);
  if (page == nullptr) fail("free of a pointer not owned by the pool", p);
  auto* c = static_cast<const char*>(p);
  if (c < page->first || c >= page->first + carved_blocks(page) * block_size_)
    fail("free of a pointer outside every block", p);
  if (std::size_t(c - page->first) % block_size_ != 0)
    fail("free of an interior pointer (not the start of a block)", p);
  if (!detail::bit_get(page->live, std::size_t(c - page->first) / block_size_))
    fail("double free", p);
}

void BlockPool::deallocate_slow(void* p) noexcept {
  if (p == nullptr) return;
  check_live_slow(p);  // an unchecked pool gets here only for a misaligned pointer, and aborts
  PoolPage* page = find_page(p);
  detail::bit_clear(page->live, std::size_t(static_cast<char*>(p) - page->first) / block_size_);
  auto* b = static_cast<detail::FreeBlockLink*>(p);
  b->next = checked_free_;
  checked_free_ = b;
}

// ---------------------------------------------------------------------------------------------
// Release, trim, walk, stats
// ---------------------------------------------------------------------------------------------

void BlockPool::release() noexcept {
  for (std::size_t i = 0; i < dir_len_; ++i) source_->unmap(dir_[i], dir_[i]->bytes);
  if (dir_) source_->unmap(dir_, dir_cap_ * sizeof(PoolPage*));
  dir_ = nullptr;
  dir_len_ = dir_cap_ = 0;
  free_ = checked_free_ = nullptr;
  bump_ = bump_end_ = checked_bump_ = checked_end_ = nullptr;
  bump_page_ = nullptr;
  next_page_bytes_ = options_.first_page_bytes;
}

std::size_t BlockPool::trim() noexcept {
  if (dir_len_ == 0) return 0;
  for (std::size_t i = 0; i < dir_len_; ++i) dir_[i]->scratch = 0;
  for (auto* b = free_list(); b; b = b->next) ++find_page(b)->scratch;
  // A page is wholly free when every carved block is on the free list. Mark it with scratch = ~0.
  bool any = false;
  for (std::size_t i = 0; i < dir_len_; ++i) {
    PoolPage* page = dir_[i];
    const bool empty = page->scratch == carved_blocks(page);
    page->scratch = empty ? ~std::size_t(0) : 0;
    any |= empty;
  }
  if (!any) return 0;
  // Unlink free blocks of doomed pages, keeping the rest of the list in order.
  detail::FreeBlockLink** link = checked_ ? &checked_free_ : &free_;
  while (*link) {
    if (find_page(*link)->scratch == ~std::size_t(0))
      *link = (*link)->next;
    else
      link = &(*link)->next;
  }
  std::size_t returned = 0, kept = 0;
  for (std::size_t i = 0; i < dir_len_; ++i) {
    PoolPage* page = dir_[i];
    if (page->scratch != ~std::size_t(0)) {
      dir_[kept++] = page;
      continue;
    }
    if (page == bump_page_) {
      bump_page_ = nullptr;
      bump_ = bump_end_ = checked_bump_ = checked_end_ = nullptr;
    }
    returned += page->bytes;
    source_->unmap(page, page->bytes);
  }
  dir_len_ = kept;
  return returned;
}

bool BlockPool::owns(const void* p) const noexcept {
  return find_page(p) != nullptr;
}

bool BlockPool::for_each_live(void (*fn)(void*, void*), void* ctx) const noexcept {
  if (dir_len_ == 0) return true;
  // Scratch bitmap of free blocks, one region per page in directory order.
  std::size_t words = 0;
  for (std::size_t i = 0; i < dir_len_; ++i) words += (dir_[i]->capacity + 63) / 64;
  const std::size_t bytes = detail::align_up(words * 8, os::page_size());
  auto* bits = static_cast<std::uint64_t*>(source_->map(bytes, os::page_size()));
  if (bits == nullptr) return false;
  // Page offsets by directory index, computed once (the scratch field holds them).
  std::size_t w = 0;
  for (std::size_t i = 0; i < dir_len_; ++i) {
    dir_[i]->scratch = w;
    w += (dir_[i]->capacity + 63) / 64;
  }
  for (auto* b = free_list(); b; b = b->next) {
    PoolPage* page = find_page(b);
    detail::bit_set(bits + page->scratch,
                    std::size_t(reinterpret_cast<char*>(b) - page->first) / block_size_);
  }
  for (std::size_t i = 0; i < dir_len_; ++i) {
    PoolPage* page = dir_[i];
    const std::size_t carved = carved_blocks(page);
    for (std::size_t k = 0; k < carved; ++k)
      if (!detail::bit_get(bits + page->scratch, k)) fn(page->first + k * block_size_, ctx);
  }
  source_->unmap(bits, bytes);
  return true;
}

std::size_t BlockPool::live_blocks() const noexcept {
  std::size_t carved = 0, free = 0;
  for (std::size_t i = 0; i < dir_len_; ++i) carved += carved_blocks(dir_[i]);
  for (auto* b = free_list(); b; b = b->next) ++free;
  return carved - free;
}

BlockPoolStats BlockPool::stats() const noexcept {
  BlockPoolStats s{block_size_, live_blocks(), dir_len_, 0, 0};
  for (std::size_t i = 0; i < dir_len_; ++i) {
    s.reserved_bytes += dir_[i]->bytes;
    s.resident_bytes += os::resident_bytes(dir_[i], dir_[i]->bytes);
  }
  return s;
}

}  // namespace ak

namespace ak::detail {
void report_pool_leaks(const char* pool_name, std::size_t count) noexcept {
  Message()
      .str("allockit: pool '")
      .str(pool_name)
      .str("' destroyed with ")
      .num(count)
      .str(" live object(s); destroying them")
      .print();
}
}  // namespace ak::detail
