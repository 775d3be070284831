// ak::SharedArena: an arena many threads allocate from at once. The bump pointer of the current
// chunk is advanced with a compare-and-swap; a full chunk is replaced under a mutex (slow path).
// Rules: allocate/make may run concurrently from any threads; reset(), stats() and destruction
// must not overlap any allocation (the thread that resets waits until the others are done).
// No markers: rewinding cannot be well defined while other threads allocate.
#pragma once

#include <atomic>
#include <mutex>
#include <type_traits>
#include <utility>

#include "allockit/arena.hpp"

namespace ak {

class SharedArena : public detail::ArenaMake<SharedArena> {
 public:
  // Effects, errors: as Arena's constructor. options.debug poisons memory on reset().
  explicit SharedArena(ArenaOptions options = {});
  ~SharedArena();
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  // As Arena::allocate / try_allocate. Thread-safe and lock-free unless a chunk fills.
  void* allocate(std::size_t size, std::size_t align = alignof(std::max_align_t));
  void* try_allocate(std::size_t size, std::size_t align = alignof(std::max_align_t)) noexcept;

  // make<T>(args...) as Arena::make; thread-safe, registering a destructor takes the mutex.

  // Effects: as Arena::reset. Not thread-safe: no allocation may be in flight.
  void reset() noexcept;
  ArenaStats stats() const noexcept;
  void set_limit(std::size_t bytes) noexcept;

 private:
  friend class detail::ArenaMake<SharedArena>;
  struct Chunk;
  bool advance(Chunk* seen) noexcept;
  void* allocate_large(std::size_t size, std::size_t align) noexcept;
  void push_dtor(detail::DtorRecord* rec, void* obj, std::size_t count,
                 void (*destroy)(void*, std::size_t)) noexcept;
  Chunk* acquire_chunk(std::size_t bytes) noexcept;  // caller holds lock_

  std::atomic<Chunk*> current_{nullptr};
  mutable std::mutex lock_;
  Chunk* first_ = nullptr;  // standard chunks in use order
  Chunk* large_ = nullptr;  // dedicated chunks, most recent first
  detail::DtorRecord* dtors_ = nullptr;
  std::size_t dtor_count_ = 0;
  std::size_t held_bytes_ = 0;
  std::size_t limit_;
  std::size_t chunk_bytes_;
  ChunkPool* pool_;
  bool debug_;
};

}  // namespace ak
