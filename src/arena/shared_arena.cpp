// ak::SharedArena: a compare-and-swap bump pointer per chunk, and a mutex for chunk changes,
// large chunks and destructor records. Chunks are published with release/acquire on current_.
#include "allockit/shared_arena.hpp"

#include <stdexcept>

#include "core/core.hpp"

namespace ak {

struct SharedArena::Chunk {
  Chunk* next;
  std::size_t bytes;
  std::atomic<std::uintptr_t> top;
  char* begin() noexcept { return reinterpret_cast<char*>(this) + 64; }
  char* end() noexcept { return reinterpret_cast<char*>(this) + bytes; }
};
static_assert(sizeof(std::atomic<std::uintptr_t>) + 2 * sizeof(void*) <= 64);

SharedArena::SharedArena(ArenaOptions options)
    : limit_(options.limit),
      chunk_bytes_(options.chunk_bytes),
      pool_(options.pool ? options.pool : &default_chunk_pool()),
      debug_(options.debug) {
  if (chunk_bytes_ < 4096 || chunk_bytes_ > (std::size_t(1) << 30))
    throw std::invalid_argument("ak::SharedArena: chunk_bytes must be between 4 KiB and 1 GiB");
}

SharedArena::~SharedArena() {
  reset();
  for (Chunk* c = first_; c;) {
    Chunk* next = c->next;
    detail::unpoison(c, c->bytes);
    pool_->release(c, c->bytes);
    c = next;
  }
}

SharedArena::Chunk* SharedArena::acquire_chunk(std::size_t bytes) noexcept {
  if (held_bytes_ + bytes > limit_ || held_bytes_ + bytes < bytes) return nullptr;
  void* mem = pool_->acquire(&bytes);
  if (mem == nullptr) return nullptr;
  held_bytes_ += bytes;
  auto* c = ::new (mem) Chunk{nullptr, bytes, {0}};
  c->top.store(detail::addr(c->begin()), std::memory_order_relaxed);
  return c;
}

bool SharedArena::advance(Chunk* seen) noexcept {
  std::lock_guard guard(lock_);
  if (current_.load(std::memory_order_relaxed) != seen) return true;  // another thread did it
  Chunk* next = seen ? seen->next : first_;
  if (next == nullptr) {
    next = acquire_chunk(chunk_bytes_);
    if (next == nullptr) return false;
    if (seen)
      seen->next = next;
    else
      first_ = next;
  }
  detail::unpoison(next->begin(), next->bytes - 64);
  current_.store(next, std::memory_order_release);
  return true;
}

void* SharedArena::allocate_large(std::size_t size, std::size_t align) noexcept {
  const std::size_t bytes = 64 + size + align;
  if (bytes < size) return nullptr;
  std::lock_guard guard(lock_);
  Chunk* c = acquire_chunk(bytes);
  if (c == nullptr) return nullptr;
  c->next = large_;
  large_ = c;
  const std::uintptr_t p = detail::align_up(detail::addr(c->begin()), align);
  c->top.store(p + size, std::memory_order_relaxed);
  return reinterpret_cast<void*>(p);
}

void* SharedArena::try_allocate(std::size_t size, std::size_t align) noexcept {
  if (!detail::is_pow2(align)) return nullptr;
  if (size > chunk_bytes_ / 4 || align > chunk_bytes_ / 8) return allocate_large(size, align);
  for (;;) {
    Chunk* c = current_.load(std::memory_order_acquire);
    if (c) {
      const std::uintptr_t end = detail::addr(c->end());
      std::uintptr_t old = c->top.load(std::memory_order_relaxed);
      for (;;) {
        const std::uintptr_t p = detail::align_up(old, align);
        if (p > end || size > end - p) break;
        if (c->top.compare_exchange_weak(old, p + size, std::memory_order_relaxed))
          return reinterpret_cast<void*>(p);
      }
    }
    if (!advance(c)) return nullptr;
  }
}

void* SharedArena::allocate(std::size_t size, std::size_t align) {
  if (void* p = try_allocate(size, align)) return p;
  if (!detail::is_pow2(align))
    throw std::invalid_argument("ak::SharedArena: alignment must be a power of two");
  throw std::bad_alloc();
}

void SharedArena::push_dtor(detail::DtorRecord* rec, void* obj, std::size_t count,
                            void (*destroy)(void*, std::size_t)) noexcept {
  std::lock_guard guard(lock_);
  *rec = detail::DtorRecord{destroy, obj, count, dtors_};
  dtors_ = rec;
  ++dtor_count_;
}

void SharedArena::reset() noexcept {
  std::lock_guard guard(lock_);
  while (dtors_) {
    detail::DtorRecord* r = dtors_;
    dtors_ = r->prev;
    r->destroy(r->objects, r->count);
  }
  dtor_count_ = 0;
  Chunk* current = current_.load(std::memory_order_relaxed);
  for (Chunk* c = first_; c; c = c->next) {
    const std::uintptr_t top = c->top.load(std::memory_order_relaxed);
    if (debug_ && top > detail::addr(c->begin()))
      detail::poison(c->begin(), top - detail::addr(c->begin()));
    c->top.store(detail::addr(c->begin()), std::memory_order_relaxed);
    if (c == current) break;  // chunks past the current one are untouched since the last reset
  }
  while (large_) {
    Chunk* c = large_;
    large_ = c->next;
    held_bytes_ -= c->bytes;
    detail::unpoison(c, c->bytes);
    pool_->release(c, c->bytes);
  }
  current_.store(nullptr, std::memory_order_release);  // the next allocation re-enters first_
}

ArenaStats SharedArena::stats() const noexcept {
  std::lock_guard guard(lock_);
  ArenaStats s{0, held_bytes_, 0, 0, dtor_count_};
  Chunk* current = current_.load(std::memory_order_relaxed);
  bool before = current != nullptr;
  for (Chunk* c = first_; c; c = c->next) {
    ++s.chunks;
    if (!before) continue;
    const std::size_t used = c->top.load(std::memory_order_relaxed) - detail::addr(c->begin());
    s.used_bytes += used;
    if (c != current) s.waste_bytes += std::size_t(c->end() - c->begin()) - used;
    if (c == current) before = false;
  }
  for (Chunk* c = large_; c; c = c->next) {
    ++s.chunks;
    s.used_bytes += c->top.load(std::memory_order_relaxed) - detail::addr(c->begin());
  }
  return s;
}

void SharedArena::set_limit(std::size_t bytes) noexcept {
  std::lock_guard guard(lock_);
  limit_ = bytes;
}

}  // namespace ak
