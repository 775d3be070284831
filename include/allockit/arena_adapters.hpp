// Adapters that put standard containers in an ak::Arena: arena_allocator<T> (a std allocator whose
// deallocate does nothing), arena_resource (a std::pmr::memory_resource) and arena_vector<T> (a
// vector that grows in place while it is the arena's most recent allocation). Same thread rules
// as the Arena they use. Included by arena.hpp.
#pragma once

#include <cstring>
#include <memory_resource>
#include <new>
#include <type_traits>
#include <utility>

namespace ak {

class Arena;

template <class T>
class arena_allocator {
 public:
  using value_type = T;

  explicit arena_allocator(Arena& arena) noexcept : arena_(&arena) {}
  template <class U>
  arena_allocator(const arena_allocator<U>& other) noexcept : arena_(other.arena()) {}

  // Errors: std::bad_array_new_length on overflow; otherwise as Arena::allocate.
  T* allocate(std::size_t n);
  void deallocate(T*, std::size_t) noexcept {}  // memory returns with the arena's reset
  Arena* arena() const noexcept { return arena_; }
  template <class U>
  bool operator==(const arena_allocator<U>& o) const noexcept {
    return arena_ == o.arena();
  }

 private:
  Arena* arena_;
};

// All std::pmr containers given this resource allocate from `arena`; deallocation is a no-op.
class arena_resource final : public std::pmr::memory_resource {
 public:
  explicit arena_resource(Arena& arena) noexcept : arena_(&arena) {}
  Arena& arena() const noexcept { return *arena_; }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t align) override;
  void do_deallocate(void*, std::size_t, std::size_t) override {}
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    auto* o = dynamic_cast<const arena_resource*>(&other);
    return o && o->arena_ == arena_;
  }

 private:
  Arena* arena_;
};

// A vector in an arena. Growth first tries Arena::try_grow (no copy while the vector's storage is
// the arena's latest allocation), else allocates twice the capacity and moves the elements; the
// old storage is reclaimed at the arena's next reset. The vector's destructor destroys elements.
template <class T>
class arena_vector {
 public:
  explicit arena_vector(Arena& arena) noexcept : arena_(&arena) {}
  // Trivial for trivially destructible T, so a vector held in an arena object registers nothing.
  ~arena_vector() requires std::is_trivially_destructible_v<T>
  = default;
  ~arena_vector() { clear(); }
  arena_vector(arena_vector&& o) noexcept
      : arena_(o.arena_), data_(o.data_), size_(o.size_), cap_(o.cap_) {
    o.data_ = nullptr;
    o.size_ = o.cap_ = 0;
  }
  arena_vector(const arena_vector&) = delete;
  arena_vector& operator=(const arena_vector&) = delete;

  template <class... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == cap_) grow(size_ + 1);
    T* slot = ::new (data_ + size_) T(std::forward<Args>(args)...);
    ++size_;
    return *slot;
  }
  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  void reserve(std::size_t n) {
    if (n > cap_) grow(n);
  }
  void clear() noexcept {
    if constexpr (!std::is_trivially_destructible_v<T>)
      for (std::size_t i = size_; i > 0; --i) data_[i - 1].~T();
    size_ = 0;
  }

  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  T* data() noexcept { return data_; }
  T* begin() noexcept { return data_; }
  T* end() noexcept { return data_ + size_; }
  const T* begin() const noexcept { return data_; }
  const T* end() const noexcept { return data_ + size_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return cap_; }
  bool empty() const noexcept { return size_ == 0; }

 private:
  void grow(std::size_t min_cap);

  Arena* arena_;
  T* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t cap_ = 0;
};

}  // namespace ak
