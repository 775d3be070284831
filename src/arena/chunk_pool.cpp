// ak::ChunkPool: a mutex-guarded list of cached chunks, linked through the chunks themselves, with
// a byte bound on what it keeps. Acquire is first-fit among cached chunks of [bytes, 2 * bytes].
#include "allockit/chunk_pool.hpp"

#include <new>

#include "os/os.hpp"

namespace ak {

struct ChunkPool::Cached {
  Cached* next;
  std::size_t bytes;
};

ChunkPool::ChunkPool(PageSource* source, std::size_t retention_bytes)
    : source_(source ? source : &os_page_source()), retention_(retention_bytes) {}

ChunkPool::~ChunkPool() {
  trim();
}

void* ChunkPool::acquire(std::size_t* bytes) noexcept {
  const std::size_t want = detail::align_up(*bytes, os::page_size());
  if (want < *bytes) return nullptr;  // overflow
  {
    std::lock_guard guard(lock_);
    for (Cached** link = &cached_; *link; link = &(*link)->next) {
      Cached* c = *link;
      if (c->bytes < want || c->bytes / 2 > want) continue;
      *link = c->next;
      --stats_.cached_chunks;
      stats_.cached_bytes -= c->bytes;
      *bytes = c->bytes;
      return c;
    }
  }
  void* p = source_->map(want, os::page_size());
  if (p == nullptr) return nullptr;
  std::lock_guard guard(lock_);
  ++stats_.map_calls;
  stats_.mapped_bytes += want;
  *bytes = want;
  return p;
}

void ChunkPool::release(void* chunk, std::size_t bytes) noexcept {
  if (chunk == nullptr) return;
  {
    std::lock_guard guard(lock_);
    if (stats_.cached_bytes + bytes <= retention_) {
      auto* c = ::new (chunk) Cached{cached_, bytes};
      cached_ = c;
      ++stats_.cached_chunks;
      stats_.cached_bytes += bytes;
      return;
    }
    ++stats_.unmap_calls;
    stats_.mapped_bytes -= bytes;
  }
  source_->unmap(chunk, bytes);
}

void ChunkPool::unmap_over(std::size_t bound) noexcept {
  while (cached_ && stats_.cached_bytes > bound) {
    Cached* c = cached_;
    cached_ = c->next;
    --stats_.cached_chunks;
    stats_.cached_bytes -= c->bytes;
    ++stats_.unmap_calls;
    stats_.mapped_bytes -= c->bytes;
    source_->unmap(c, c->bytes);
  }
}

void ChunkPool::set_retention(std::size_t bytes) noexcept {
  std::lock_guard guard(lock_);
  retention_ = bytes;
  unmap_over(bytes);
}

std::size_t ChunkPool::trim() noexcept {
  std::lock_guard guard(lock_);
  const std::size_t before = stats_.cached_bytes;
  unmap_over(0);
  return before;
}

ChunkPoolStats ChunkPool::stats() const noexcept {
  std::lock_guard guard(lock_);
  return stats_;
}

ChunkPool& default_chunk_pool() noexcept {
  static ChunkPool* const pool = ::new ChunkPool();  // outlives every static arena
  return *pool;
}

}  // namespace ak
