// Shared size-class pools: one process-wide pool per size class, reached through per-thread heaps
// with no lock and no atomic read-modify-write on the fast path. A block freed by another thread
// goes back to its owner lock-free. Heaps of exited threads are handed to the next new thread.
// Everything here is thread-safe. Sizes above 16 KiB or alignments above 2 KiB fall through to
// the global ::operator new, so the adapters accept every request.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory_resource>
#include <new>
#include <set>
#include <type_traits>
#include <unordered_map>

#include "allockit/detail/shared_pool.hpp"
#include "allockit/detail/size_classes.hpp"

namespace ak {

// ---------------------------------------------------------------------------------------------
// Raw entry points
// ---------------------------------------------------------------------------------------------

// Effects: allocates `size` bytes aligned to `align` from the shared pools.
// Errors: std::invalid_argument when size is 0 or align is not a power of two; std::bad_alloc
// when out of memory or the size is unrepresentable.
void* pool_allocate(std::size_t size, std::size_t align = alignof(std::max_align_t));
// As pool_allocate, but returns null on every error. Never throws.
void* try_pool_allocate(std::size_t size, std::size_t align = alignof(std::max_align_t)) noexcept;
// Effects: frees `p` from pool_allocate(size, align) with the same size and align; null ignored.
// Errors: debug builds abort with a message on a double, foreign or interior free.
inline void pool_deallocate(void* p, std::size_t size,
                            std::size_t align = alignof(std::max_align_t)) noexcept;

struct PoolStats {
  std::size_t slabs_in_use;    // slabs owned by thread heaps
  std::size_t slabs_cached;    // empty slabs kept for reuse (resident or not)
  std::size_t reserved_bytes;  // address space reserved for slabs
  std::size_t resident_bytes;  // slab memory resident in RAM (measured with mincore)
  std::size_t heaps;           // thread heaps created (live and handed back)
};
// Returns: a snapshot of the shared pools. Thread-safe; O(regions).
PoolStats pool_stats() noexcept;
// Effects: hands the calling thread's batched cross-thread frees to their owners, sorts frees
// that reached heaps of exited threads back into their slabs, then gives cached empty slabs'
// memory back to the OS at once. Returns: bytes given back.
std::size_t pool_trim() noexcept;
// Effects: sets how long an empty slab stays resident for reuse before its memory goes back to
// the OS (default 1000 ms). Checked whenever a slab is taken or returned. Thread-safe.
void pool_set_purge_delay_ms(std::uint64_t ms) noexcept;

namespace detail {
[[noreturn]] void throw_bad_array_length();
// Inline front of pool_allocate for callers whose size and alignment are known valid (non-zero,
// power of two): pooled classes never leave the header.
inline void* pool_allocate_valid(std::size_t size, std::size_t align) {
  const unsigned cls = class_for(size, align);
  if (cls < kPoolClasses) [[likely]] {
    if (void* p = pool_alloc(cls)) [[likely]]
      return p;
    throw std::bad_alloc();
  }
  return pool_allocate(size, align);
}
// Class of a request, folded at compile time when size and align are constants.
constexpr unsigned pool_class(std::size_t size, std::size_t align) noexcept {
  return class_for(size, align);
}
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// ak::pool_allocator<T>: a stateless std allocator over the shared pools
// ---------------------------------------------------------------------------------------------

template <class T>
class pool_allocator {
 public:
  using value_type = T;
  using is_always_equal = std::true_type;
  using propagate_on_container_move_assignment = std::true_type;

  pool_allocator() noexcept = default;
  template <class U>
  pool_allocator(const pool_allocator<U>&) noexcept {}

  // Effects: storage for n objects of T (n == 0 gives a valid, unique block).
  // Errors: std::bad_array_new_length when n * sizeof(T) overflows; std::bad_alloc when out of
  // memory.
  T* allocate(std::size_t n) {
    if (n > std::size_t(-1) / sizeof(T)) detail::throw_bad_array_length();
    if (n == 1) {  // node containers: the class is a compile-time constant
      constexpr unsigned cls = detail::pool_class(sizeof(T), alignof(T));
      if constexpr (cls < detail::kPoolClasses) {
        if (void* p = detail::pool_alloc(cls)) [[likely]]
          return static_cast<T*>(p);
        throw std::bad_alloc();
      }
    }
    return static_cast<T*>(pool_allocate(n ? n * sizeof(T) : 1, alignof(T)));
  }

  // Effects: frees storage from allocate(n) with the same n. Never throws.
  void deallocate(T* p, std::size_t n) noexcept {
    constexpr unsigned cls = detail::pool_class(sizeof(T), alignof(T));
    if (n == 1 && cls < detail::kPoolClasses) return detail::pool_free(p, cls);
    pool_deallocate(p, n ? n * sizeof(T) : 1, alignof(T));
  }

  template <class U>
  bool operator==(const pool_allocator<U>&) const noexcept {
    return true;
  }
};

// ---------------------------------------------------------------------------------------------
// ak::pool_resource: the shared pools as a std::pmr::memory_resource
// ---------------------------------------------------------------------------------------------

// All pool_resource objects share the same pools and compare equal. A request of 0 bytes gets a
// valid 1-byte block. Thread-safe.
class pool_resource final : public std::pmr::memory_resource {
 protected:
  void* do_allocate(std::size_t bytes, std::size_t align) override {
    return pool_allocate(bytes ? bytes : 1, align);
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t align) override {
    pool_deallocate(p, bytes ? bytes : 1, align);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return dynamic_cast<const pool_resource*>(&other) != nullptr;
  }
};

// Returns: the process-wide pool_resource (never destroyed, usable during static destruction).
pool_resource* get_pool_resource() noexcept;

// ---------------------------------------------------------------------------------------------
// Node containers on the shared pools
// ---------------------------------------------------------------------------------------------

template <class T>
using list = std::list<T, pool_allocator<T>>;
template <class K, class V, class Compare = std::less<K>>
using map = std::map<K, V, Compare, pool_allocator<std::pair<const K, V>>>;
template <class K, class Compare = std::less<K>>
using set = std::set<K, Compare, pool_allocator<K>>;
template <class K, class V, class Hash = std::hash<K>, class Eq = std::equal_to<K>>
using unordered_map = std::unordered_map<K, V, Hash, Eq, pool_allocator<std::pair<const K, V>>>;

// ---------------------------------------------------------------------------------------------
// ak::SmallObject<Derived>: class-level operator new/delete on the shared pools
// ---------------------------------------------------------------------------------------------

// Derive from SmallObject<Derived> to allocate Derived (and its subclasses) from the shared pools.
// Deletion through a base pointer needs a virtual destructor, as always, so the sized delete
// receives the dynamic size. Arrays use the global operators.
template <class Derived>
class SmallObject {
 public:
  static void* operator new(std::size_t size) {
    return detail::pool_allocate_valid(size, natural_align(size));
  }
  static void* operator new(std::size_t size, std::align_val_t al) {
    return detail::pool_allocate_valid(size, std::size_t(al));
  }
  static void operator delete(void* p, std::size_t size) noexcept {
    pool_deallocate(p, size, natural_align(size));
  }
  static void operator delete(void* p, std::size_t size, std::align_val_t al) noexcept {
    pool_deallocate(p, size, std::size_t(al));
  }

 private:
  // sizeof(T) is a multiple of alignof(T), so a size's lowest set bit bounds the type's alignment.
  static constexpr std::size_t natural_align(std::size_t size) noexcept {
    const std::size_t low = size & (~size + 1);
    return low < alignof(std::max_align_t) ? low : alignof(std::max_align_t);
  }
};

// ---------------------------------------------------------------------------------------------
// Inline definitions
// ---------------------------------------------------------------------------------------------

inline void pool_deallocate(void* p, std::size_t size, std::size_t align) noexcept {
  if (p == nullptr) return;
  const unsigned cls = detail::pool_class(size, align);
  if (cls < detail::kPoolClasses) [[likely]]
    return detail::pool_free(p, cls);
  ::operator delete(p, std::align_val_t(align));
}

}  // namespace ak
