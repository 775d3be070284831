// ak::Arena: linear allocation for objects that die together. A bump pointer with no per-object
// header; reset() keeps every chunk (no system calls in the steady state); mark()/rewind() restore
// checkpoints; destructors of non-trivial objects run in reverse order on reset/rewind/destruction.
// Arena is NOT thread-safe (see SharedArena for many threads on one arena). Chunks come from a
// thread-safe ChunkPool shared by all arenas.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string_view>
#include <type_traits>
#include <utility>

#include "allockit/chunk_pool.hpp"
#include "allockit/config.hpp"

namespace ak {

// True in AK_DEBUG builds or when the environment sets ALLOCKIT_ARENA_DEBUG=1.
bool arena_debug_default() noexcept;

struct ArenaOptions {
  const char* name = "Arena";           // used in error messages
  std::size_t chunk_bytes = 64 << 10;   // standard chunk size; never changes afterwards
  std::size_t limit = std::size_t(-1);  // most chunk bytes the arena may hold
  bool debug = arena_debug_default();   // poison memory freed by reset/rewind
  ChunkPool* pool = nullptr;            // null: default_chunk_pool()
};

struct ArenaStats {
  std::size_t used_bytes;      // bytes handed out since the last reset, alignment padding included
  std::size_t reserved_bytes;  // bytes of every chunk held (standard and large)
  std::size_t chunks;          // chunks held
  std::size_t waste_bytes;     // unusable tails of chunks left behind by the bump pointer
  std::size_t destructors;     // destructor records pending (non-trivial objects alive)
};

namespace detail {
struct ArenaChunk;
struct DtorRecord {
  void (*destroy)(void* objects, std::size_t count);
  void* objects;
  std::size_t count;
  DtorRecord* prev;
};
template <class T>
void destroy_n(void* p, std::size_t n) {
  for (std::size_t i = n; i > 0; --i) static_cast<T*>(p)[i - 1].~T();
}

// make<T>() for any arena type A with allocate(size, align) and push_dtor(rec, objs, n, fn).
template <class A>
class ArenaMake {
 public:
  // Effects: constructs a T in the arena. Non-trivially destructible types get a destructor
  // record (run on reset/rewind/destruction, most recent first); trivial ones register nothing.
  // Errors: as allocate(); an exception from T's constructor propagates (nothing is registered).
  template <class T, class... Args>
  T* make(Args&&... args) {
    A& a = static_cast<A&>(*this);
    if constexpr (std::is_trivially_destructible_v<T>) {
      return ::new (a.allocate(sizeof(T), alignof(T))) T(std::forward<Args>(args)...);
    } else {
      auto* rec = static_cast<DtorRecord*>(a.allocate(sizeof(DtorRecord), alignof(DtorRecord)));
      T* obj = ::new (a.allocate(sizeof(T), alignof(T))) T(std::forward<Args>(args)...);
      a.push_dtor(rec, obj, 1, &destroy_n<T>);
      return obj;
    }
  }
};
}  // namespace detail

// A checkpoint of one arena. Valid until that arena is reset or rewound to an earlier point.
class ArenaMarker {
 private:
  friend class Arena;
  const void* arena_ = nullptr;
  std::uint64_t epoch_ = 0;
  std::size_t chunk_index_ = 0;
  char* ptr_ = nullptr;
  detail::DtorRecord* dtors_ = nullptr;
  std::size_t large_count_ = 0;
};

class Arena : public detail::ArenaMake<Arena> {
 public:
  // Effects: an empty arena; no memory is taken until the first allocation.
  // Errors: std::invalid_argument when options.chunk_bytes is below 4 KiB or above 1 GiB.
  explicit Arena(ArenaOptions options = {});
  // Effects: runs pending destructors (most recent first) and returns every chunk to the pool.
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Returns: `size` bytes aligned to `align`, valid until reset/rewind/destruction.
  // Errors: std::invalid_argument when align is not a power of two; std::bad_alloc when out of
  // memory or past the limit. The arena stays usable after an error. Cost: O(1), no header.
  void* allocate(std::size_t size, std::size_t align = alignof(std::max_align_t)) {
    std::uintptr_t p;
    if (bump(size, align, &p)) [[likely]]
      return reinterpret_cast<void*>(p);
    return allocate_or_throw(size, align);
  }

  // As allocate(), but returns null on every error. Fast path: a mask, two compares, a store.
  void* try_allocate(std::size_t size, std::size_t align = alignof(std::max_align_t)) noexcept {
    std::uintptr_t p;
    if (bump(size, align, &p)) [[likely]]
      return reinterpret_cast<void*>(p);
    return allocate_slow(size, align);
  }

  // Effects: grows the most recent allocation `p` from old_size to new_size bytes in place.
  // Returns: false (changing nothing) when `p` is not the most recent allocation or the chunk has
  // no room; the caller then allocates anew. Cost: O(1).
  bool try_grow(void* p, std::size_t old_size, std::size_t new_size) noexcept {
    const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p);
    if (a + old_size != pos_ || new_size < old_size) return false;
    if (new_size - old_size <= lim_ - pos_) {
      pos_ = a + new_size;
      return true;
    }
    return grow_slow(static_cast<char*>(p), old_size, new_size);
  }

  // As make(), but returns null when out of memory or past the limit.
  template <class T, class... Args>
  T* try_make(Args&&... args) {
    detail::DtorRecord* rec = nullptr;
    if constexpr (!std::is_trivially_destructible_v<T>) {
      rec = static_cast<detail::DtorRecord*>(
          try_allocate(sizeof(detail::DtorRecord), alignof(detail::DtorRecord)));
      if (rec == nullptr) return nullptr;
    }
    void* p = try_allocate(sizeof(T), alignof(T));
    if (p == nullptr) return nullptr;
    T* obj = ::new (p) T(std::forward<Args>(args)...);
    if (rec) push_dtor(rec, obj, 1, &detail::destroy_n<T>);
    return obj;
  }

  // Effects: n value-initialised T, destroyed together (in reverse order) when non-trivial.
  // Errors: std::bad_array_new_length when n * sizeof(T) overflows; otherwise as make().
  template <class T>
  T* make_array(std::size_t n) {
    if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
    T* arr = try_make_array<T>(n);
    if (arr == nullptr) throw_failure(n * sizeof(T), alignof(T));
    return arr;
  }

  // As make_array(), but returns null on overflow, out of memory or past the limit.
  template <class T>
  T* try_make_array(std::size_t n) {
    if (n > std::size_t(-1) / sizeof(T)) return nullptr;
    detail::DtorRecord* rec = nullptr;
    if constexpr (!std::is_trivially_destructible_v<T>) {
      rec = static_cast<detail::DtorRecord*>(
          try_allocate(sizeof(detail::DtorRecord), alignof(detail::DtorRecord)));
      if (rec == nullptr) return nullptr;
    }
    T* arr = static_cast<T*>(try_allocate(n * sizeof(T), alignof(T)));
    if (arr == nullptr) return nullptr;
    std::size_t built = 0;
    try {
      for (; built < n; ++built) ::new (arr + built) T();
    } catch (...) {
      detail::destroy_n<T>(arr, built);
      throw;
    }
    if (rec) push_dtor(rec, arr, n, &detail::destroy_n<T>);
    return arr;
  }

  // Returns: a NUL-terminated copy of `s` in the arena. Errors: as allocate().
  std::string_view make_string(std::string_view s);

  // Effects: runs pending destructors (most recent first), forgets every allocation and keeps every
  // standard chunk for reuse; large chunks go back to the pool. Invalidates all markers. In debug
  // mode the freed memory is poisoned (ASan poisoning in ASan builds, else a 0xDD fill).
  void reset() noexcept;
  // Returns: a checkpoint of the current position. Cost: O(1).
  ArenaMarker mark() const noexcept;
  // Effects: as reset(), but back to `m` only: later objects are destroyed and their memory
  // reused. Errors: aborts with a message when `m` comes from another arena, was invalidated by a
  // reset, or lies past the current position (invalidated by an earlier rewind).
  void rewind(const ArenaMarker& m) noexcept;

  // Effects: later chunk acquisitions fail once the arena would hold more than `bytes`.
  void set_limit(std::size_t bytes) noexcept { limit_ = bytes; }
  // Returns: whether `p` points into one of this arena's chunks. Cost: O(chunks).
  bool owns(const void* p) const noexcept;
  // Returns: the counters above. Cost: O(chunks).
  ArenaStats stats() const noexcept;
  bool debug() const noexcept { return debug_; }
  const char* name() const noexcept { return name_; }

 private:
  friend class detail::ArenaMake<Arena>;
  // The fast path: bumps when `align` is valid and the current range has room.
  bool bump(std::size_t size, std::size_t align, std::uintptr_t* out) noexcept {
    if ((align & (align - 1)) != 0 || align == 0) [[unlikely]]
      return false;
    const std::uintptr_t p = (pos_ + align - 1) & ~(align - 1);
    if (p > lim_ || size > lim_ - p) [[unlikely]]
      return false;
    pos_ = p + size;
    *out = p;
    return true;
  }
  void* allocate_slow(std::size_t size, std::size_t align) noexcept;
  void* allocate_or_throw(std::size_t size, std::size_t align);
  bool grow_slow(char* p, std::size_t old_size, std::size_t new_size) noexcept;
  [[noreturn]] void throw_failure(std::size_t size, std::size_t align) const;
  void push_dtor(detail::DtorRecord* rec, void* objects, std::size_t count,
                 void (*destroy)(void*, std::size_t)) noexcept;
  void run_dtors_until(detail::DtorRecord* stop) noexcept;
  void* allocate_large(std::size_t size, std::size_t align) noexcept;
  bool next_chunk() noexcept;
  void enter_chunk(detail::ArenaChunk* c, std::size_t index, char* at) noexcept;
  void rewind_to(detail::ArenaChunk* chunk, std::size_t index, char* at,
                 std::size_t large_count) noexcept;
  void return_chunk(detail::ArenaChunk* c) noexcept;
  [[noreturn]] void fail(const char* what) const noexcept;

  char* pos() const noexcept { return reinterpret_cast<char*>(pos_); }

  // Hot: the bump range [pos_, lim_). Integers, not char*, so that pointer-typed stores into
  // allocated objects cannot alias them and the compiler keeps them in registers in loops.
  // In debug mode lim_ == pos_, so every allocation takes the slow path, which unpoisons what it
  // hands out; chunk_lim_ is the real end of the current chunk.
  std::uintptr_t pos_ = 0;
  std::uintptr_t lim_ = 0;
  std::uintptr_t chunk_lim_ = 0;
  // Cold.
  detail::ArenaChunk* first_ = nullptr;    // standard chunks in use order
  detail::ArenaChunk* current_ = nullptr;  // the chunk ptr_ bumps through
  std::size_t current_index_ = 0;
  detail::ArenaChunk* large_ = nullptr;  // dedicated chunks, most recent first
  std::size_t large_count_ = 0;
  detail::DtorRecord* dtors_ = nullptr;  // most recent first
  std::size_t dtor_count_ = 0;
  std::uint64_t epoch_ = 0;
  std::size_t held_bytes_ = 0;
  std::size_t limit_;
  std::size_t chunk_bytes_;
  ChunkPool* pool_;
  const char* name_;
  bool debug_;
};

}  // namespace ak

#include "allockit/arena_adapters.hpp"

namespace ak {

template <class T>
T* arena_allocator<T>::allocate(std::size_t n) {
  if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
  return static_cast<T*>(arena_->allocate(n * sizeof(T), alignof(T)));
}

inline void* arena_resource::do_allocate(std::size_t bytes, std::size_t align) {
  return arena_->allocate(bytes, align);
}

template <class T>
void arena_vector<T>::grow(std::size_t min_cap) {
  std::size_t cap = cap_ ? cap_ * 2 : 4;
  if (cap < min_cap) cap = min_cap;
  if (cap > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
  if (data_ && arena_->try_grow(data_, cap_ * sizeof(T), cap * sizeof(T))) {
    cap_ = cap;
    return;
  }
  T* fresh = static_cast<T*>(arena_->allocate(cap * sizeof(T), alignof(T)));
  if constexpr (std::is_trivially_copyable_v<T>) {
    if (size_) std::memcpy(static_cast<void*>(fresh), data_, size_ * sizeof(T));
  } else {
    for (std::size_t i = 0; i < size_; ++i) {
      ::new (fresh + i) T(std::move_if_noexcept(data_[i]));
      data_[i].~T();
    }
  }
  data_ = fresh;
  cap_ = cap;
}

}  // namespace ak
