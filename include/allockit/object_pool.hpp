// ak::ObjectPool<T>: typed objects on a BlockPool. create/destroy are O(1) in any order; destroying
// the pool destroys the objects still alive in one O(n) walk (and reports them in debug builds).
// NOT thread-safe, like BlockPool.
//
// Checking is part of the type, so the unchecked destroy() carries no test at all (a single
// branch on this path costs about 5% against boost::object_pool): ObjectPool<T> checks in AK_DEBUG
// builds only; CheckedObjectPool<T> checks in every build (double, foreign and interior destroys
// abort with a message naming the pool, before the destructor runs).
#pragma once

#include <type_traits>
#include <utility>

#include "allockit/block_pool.hpp"

namespace ak {

namespace detail {
void report_pool_leaks(const char* pool_name, std::size_t count) noexcept;
}

template <class T, bool kChecked = kDebugBuild>
class ObjectPool {
 public:
  // Effects: an empty pool for T; `options.checked` is ignored: the type decides.
  // Errors: as BlockPool's constructor (never for a complete T).
  explicit ObjectPool(BlockPoolOptions options = {})
      : pool_(sizeof(T), alignof(T), with_name(options)) {}

  // Effects: destroys every object still alive, then returns all memory. In debug builds, a
  // non-empty pool is reported on stderr as a leak.
  ~ObjectPool() {
    const std::size_t alive = pool_.live_blocks();
    if (alive == 0) return;
    if constexpr (kDebugBuild) detail::report_pool_leaks(pool_.name(), alive);
    if constexpr (!std::is_trivially_destructible_v<T>)
      pool_.for_each_live([](void* p, void*) { static_cast<T*>(p)->~T(); }, nullptr);
  }

  ObjectPool(const ObjectPool&) = delete;
  ObjectPool& operator=(const ObjectPool&) = delete;

  // Effects: constructs a T from `args` in a pooled block. Errors: std::bad_alloc when out of
  // memory; an exception from T's constructor propagates and the block is returned.
  template <class... Args>
  T* create(Args&&... args) {
    void* p = pool_.allocate();
    return construct(p, std::forward<Args>(args)...);
  }

  // As create(), but returns null when out of memory.
  template <class... Args>
  T* try_create(Args&&... args) {
    void* p = pool_.try_allocate();
    return p ? construct(p, std::forward<Args>(args)...) : nullptr;
  }

  // Effects: destroys `obj` (from this pool) and recycles its block; null is ignored.
  // Errors: a checked pool validates `obj` before running its destructor and aborts with a
  // message on a double, foreign or interior destroy; an unchecked pool trusts it. Cost: O(1).
  void destroy(T* obj) noexcept {
    if (obj == nullptr) return;
    if constexpr (kChecked) {
      pool_.check_live(obj);
      obj->~T();
      pool_.deallocate(obj);
    } else {
      obj->~T();
      pool_.deallocate_unchecked(obj);
    }
  }

  // Returns: objects alive. Cost: O(pages + free blocks); meant for diagnostics and tests.
  std::size_t size() const noexcept { return pool_.live_blocks(); }
  BlockPoolStats stats() const noexcept { return pool_.stats(); }
  std::size_t trim() noexcept { return pool_.trim(); }
  bool owns(const T* obj) const noexcept { return pool_.owns(obj); }

 private:
  static BlockPoolOptions with_name(BlockPoolOptions o) {
    if (o.name == BlockPoolOptions{}.name) o.name = "ObjectPool";
    o.checked = kChecked;
    return o;
  }

  template <class... Args>
  T* construct(void* p, Args&&... args) {
    if constexpr (std::is_nothrow_constructible_v<T, Args...>) {
      return ::new (p) T(std::forward<Args>(args)...);
    } else {
      try {
        return ::new (p) T(std::forward<Args>(args)...);
      } catch (...) {
        pool_.deallocate(p);
        throw;
      }
    }
  }

  BlockPool pool_;
};

// An ObjectPool that checks every destroy in every build.
template <class T>
using CheckedObjectPool = ObjectPool<T, true>;

}  // namespace ak
