// The override shim: libc allocation names and every C++ operator new/delete, forwarded to the ak_
// API. Built only into liballockit.so (LD_PRELOAD) and liballockit_override.a (link-time); the
// core libraries export no libc names. Nothing else lives here.
#include <cstddef>
#include <new>

#include "allockit/allockit.h"

#define AK_EXPORT extern "C" __attribute__((visibility("default")))

AK_EXPORT void* malloc(size_t n) {
  return ak_malloc(n);
}
AK_EXPORT void free(void* p) {
  ak_free(p);
}
AK_EXPORT void cfree(void* p) {
  ak_free(p);
}
AK_EXPORT void* calloc(size_t n, size_t size) {
  return ak_calloc(n, size);
}
AK_EXPORT void* realloc(void* p, size_t n) {
  return ak_realloc(p, n);
}
AK_EXPORT void* reallocarray(void* p, size_t n, size_t size) {
  return ak_reallocarray(p, n, size);
}
AK_EXPORT int posix_memalign(void** out, size_t a, size_t n) {
  return ak_posix_memalign(out, a, n);
}
AK_EXPORT void* aligned_alloc(size_t a, size_t n) {
  return ak_aligned_alloc(a, n);
}
AK_EXPORT void* memalign(size_t a, size_t n) {
  return ak_memalign(a, n);
}
AK_EXPORT void* valloc(size_t n) {
  return ak_valloc(n);
}
AK_EXPORT void* pvalloc(size_t n) {
  return ak_pvalloc(n);
}
AK_EXPORT size_t malloc_usable_size(void* p) {
  return ak_malloc_usable_size(p);
}
AK_EXPORT void free_sized(void* p, size_t n) {
  ak_free_sized(p, n);
}
AK_EXPORT void free_aligned_sized(void* p, size_t a, size_t n) {
  ak_free_aligned_sized(p, a, n);
}
AK_EXPORT int malloc_trim(size_t pad) {
  return ak_malloc_trim(pad);
}

// ---- C++: throwing forms loop on the new_handler, as the standard requires ----

namespace {
void* new_or_throw(std::size_t n) {
  for (;;) {
    if (void* p = ak_malloc(n)) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}
void* new_aligned_or_throw(std::size_t n, std::align_val_t a) {
  for (;;) {
    if (void* p = ak_memalign(static_cast<std::size_t>(a), n)) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}
void* new_nothrow(std::size_t n) noexcept {
  try {
    return new_or_throw(n);
  } catch (...) {
    return nullptr;
  }
}
void* new_aligned_nothrow(std::size_t n, std::align_val_t a) noexcept {
  try {
    return new_aligned_or_throw(n, a);
  } catch (...) {
    return nullptr;
  }
}
}  // namespace

#define AK_CXX __attribute__((visibility("default")))

AK_CXX void* operator new(std::size_t n) {
  return new_or_throw(n);
}
AK_CXX void* operator new[](std::size_t n) {
  return new_or_throw(n);
}
AK_CXX void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return new_nothrow(n);
}
AK_CXX void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return new_nothrow(n);
}
AK_CXX void* operator new(std::size_t n, std::align_val_t a) {
  return new_aligned_or_throw(n, a);
}
AK_CXX void* operator new[](std::size_t n, std::align_val_t a) {
  return new_aligned_or_throw(n, a);
}
AK_CXX void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return new_aligned_nothrow(n, a);
}
AK_CXX void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return new_aligned_nothrow(n, a);
}

AK_CXX void operator delete(void* p) noexcept {
  ak_free(p);
}
AK_CXX void operator delete[](void* p) noexcept {
  ak_free(p);
}
AK_CXX void operator delete(void* p, std::size_t n) noexcept {
  ak_free_sized(p, n);
}
AK_CXX void operator delete[](void* p, std::size_t n) noexcept {
  ak_free_sized(p, n);
}
AK_CXX void operator delete(void* p, const std::nothrow_t&) noexcept {
  ak_free(p);
}
AK_CXX void operator delete[](void* p, const std::nothrow_t&) noexcept {
  ak_free(p);
}
AK_CXX void operator delete(void* p, std::align_val_t) noexcept {
  ak_free(p);
}
AK_CXX void operator delete[](void* p, std::align_val_t) noexcept {
  ak_free(p);
}
AK_CXX void operator delete(void* p, std::size_t n, std::align_val_t a) noexcept {
  ak_free_aligned_sized(p, static_cast<std::size_t>(a), n);
}
AK_CXX void operator delete[](void* p, std::size_t n, std::align_val_t a) noexcept {
  ak_free_aligned_sized(p, static_cast<std::size_t>(a), n);
}
AK_CXX void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  ak_free(p);
}
AK_CXX void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  ak_free(p);
}
