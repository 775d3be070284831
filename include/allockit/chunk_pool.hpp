// ak::ChunkPool: where arenas get their chunks. Thread-safe (one mutex, slow paths only). Freed
// chunks are kept for reuse up to a retention bound in bytes; beyond it they go back to the OS.
#pragma once

#include <cstddef>
#include <mutex>

#include "allockit/page_source.hpp"

namespace ak {

struct ChunkPoolStats {
  std::size_t cached_chunks;  // chunks held for reuse
  std::size_t cached_bytes;   // their total size (never above the retention bound)
  std::size_t mapped_bytes;   // every chunk currently mapped: in arenas or cached
  std::size_t map_calls;      // chunks ever mapped from the page source
  std::size_t unmap_calls;    // chunks ever returned to the page source
};

class ChunkPool {
 public:
  static constexpr std::size_t kDefaultRetention = std::size_t(64) << 20;

  // Effects: an empty pool over `source` (null: the OS) keeping at most `retention_bytes` cached.
  explicit ChunkPool(PageSource* source = nullptr, std::size_t retention_bytes = kDefaultRetention);
  ~ChunkPool();  // returns every cached chunk; chunks still in arenas must be released first
  ChunkPool(const ChunkPool&) = delete;
  ChunkPool& operator=(const ChunkPool&) = delete;

  // Returns: a chunk of at least `bytes` (rounded up to the OS page size) and at most twice that,
  // reused when one is cached; null when the source fails. `*bytes` is updated to its real size.
  void* acquire(std::size_t* bytes) noexcept;
  // Effects: takes back a chunk from acquire() with its real size; caches it or unmaps it.
  void release(void* chunk, std::size_t bytes) noexcept;
  // Effects: changes the retention bound and unmaps cached chunks above it.
  void set_retention(std::size_t bytes) noexcept;
  // Effects: unmaps every cached chunk. Returns: bytes unmapped.
  std::size_t trim() noexcept;
  ChunkPoolStats stats() const noexcept;

 private:
  struct Cached;
  void unmap_over(std::size_t bound) noexcept;  // caller holds lock_

  PageSource* source_;
  std::size_t retention_;
  mutable std::mutex lock_;
  Cached* cached_ = nullptr;  // intrusive list inside the cached chunks themselves
  ChunkPoolStats stats_{};
};

// Returns: the process-wide pool shared by every arena that names no other. Never destroyed.
ChunkPool& default_chunk_pool() noexcept;

}  // namespace ak
