// The override shim: libc allocation names (with glibc's introspection calls) and every C++
// operator new/delete, forwarded to the ak_ API. Built only into liballockit.so (LD_PRELOAD) and
// liballockit_override.a (link-time); the core libraries export no libc names. Nothing else lives
// here.
#include <cstddef>
#include <new>

#include "allockit/allockit.h"
#include "core/core.hpp"
#include "malloc/glibc_info.hpp"
#include "malloc/new_block.hpp"

#define AK_EXPORT extern "C" __attribute__((visibility("default")))

// The names below only forward. The shared libraries define none of them here: the linker makes
// each the address of its ak_ function (src/CMakeLists.txt, AK_LINKER_ALIASES), so a call through
// the PLT lands in the allocator with no extra jump. The static libraries keep these definitions.
#if !AK_LINKER_ALIASES
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
// glibc's own names for its allocator, which a program or library may call directly (a malloc
// wrapper, an older runtime): a block from one name freed through the other must not cross
// allocators, so these are allockit's too, as in tcmalloc and mimalloc.
#if defined(__clang__)
#define AK_SAME_AS(name) __attribute__((alias(#name)))
#else  // GCC: the alias takes its target's attributes (nothrow, malloc, alloc_size), as it must
#define AK_SAME_AS(name) __attribute__((alias(#name), copy(name)))
#endif
AK_EXPORT void* __libc_malloc(size_t) AK_SAME_AS(malloc);
AK_EXPORT void __libc_free(void*) AK_SAME_AS(free);
AK_EXPORT void* __libc_calloc(size_t, size_t) AK_SAME_AS(calloc);
AK_EXPORT void* __libc_realloc(void*, size_t) AK_SAME_AS(realloc);
AK_EXPORT void* __libc_memalign(size_t, size_t) AK_SAME_AS(memalign);
AK_EXPORT void* __libc_valloc(size_t) AK_SAME_AS(valloc);
AK_EXPORT void* __libc_pvalloc(size_t) AK_SAME_AS(pvalloc);
#undef AK_SAME_AS
#endif

// glibc's introspection and tuning calls, answered for liballockit (malloc/glibc_info.hpp). The
// structs are glibc's by layout (its ABI), not <malloc.h>'s, which declares mallinfo2 only from
// glibc 2.33 on: the shim needs no header of that age.
AK_EXPORT ak::detail::GlibcMallinfo mallinfo2() {
  return ak::detail::glibc_mallinfo();
}
AK_EXPORT ak::detail::GlibcMallinfoInts mallinfo() {
  return ak::detail::glibc_mallinfo_ints();
}
AK_EXPORT void malloc_stats() {
  ak_stats_print();
}
AK_EXPORT int malloc_info(int options, FILE* out) {
  return ak::detail::glibc_malloc_info(options, out);
}
AK_EXPORT int mallopt(int param, int value) {
  return ak::detail::glibc_mallopt(param, value);
}

// ---- C++: throwing forms loop on the new_handler, as the standard requires ----
// liballockit.so must not need the C++ runtime (a C program would load libstdc++ for nothing),
// so everything the operators take from it is a weak reference, bound only when the process has
// libstdc++ anyway: the new_handler, the bad_alloc thrower, and the catch in the nothrow forms
// (its personality routine and __cxa_begin/end_catch). Without libstdc++ no handler can have been
// set, so nothing is ever thrown or caught; a throwing new that fails then reports and aborts,
// as mimalloc does. (libstdc++ dlopen'd later, privately, is not seen: the same report.)

using NewHandler = void (*)();
extern "C" {
NewHandler ak_weak_get_new_handler() __asm__("_ZSt15get_new_handlerv") __attribute__((weak));
[[noreturn]] void ak_weak_throw_bad_alloc() __asm__("_ZSt17__throw_bad_allocv")
    __attribute__((weak));
}
// The compiler declares these itself for the catch below; the assembler directive makes those
// references weak too.
__asm__(".weak __gxx_personality_v0\n.weak __cxa_begin_catch\n.weak __cxa_end_catch");

namespace {

NewHandler current_new_handler() {
  return ak_weak_get_new_handler ? ak_weak_get_new_handler() : nullptr;
}

[[noreturn]] void fail_new(std::size_t n) {
  if (ak_weak_throw_bad_alloc) ak_weak_throw_bad_alloc();
  ak::detail::Message()
      .str("allockit: operator new: out of memory (")
      .num(n)
      .str(" bytes), and no C++ runtime in the process to throw std::bad_alloc")
      .fail();
}

// The new-handler loop after an allocation of `n` bytes failed: the handler, then `retry`, until
// a block comes; with no handler set, fail_new.
template <class Retry>
void* after_new_failed(std::size_t n, Retry retry) {
  for (;;) {
    NewHandler handler = current_new_handler();
    if (handler == nullptr) fail_new(n);
    handler();
    if (void* p = retry()) return p;
  }
}
void* new_aligned_or_throw(std::size_t n, std::align_val_t a) {
  auto alloc = [n, a] { return ak_memalign(static_cast<std::size_t>(a), n); };
  if (void* p = alloc()) return p;
  return after_new_failed(n, alloc);
}
// Nothrow forms: null when out of memory and no handler is set (the common case, no catch
// involved), else the throwing form inside a catch, since a handler may throw bad_alloc.
void* new_nothrow(std::size_t n) noexcept {
  if (void* p = ak_malloc(n)) return p;
  if (current_new_handler() == nullptr) return nullptr;
  try {
    return ak::detail::new_failed(n);
  } catch (...) {
    return nullptr;
  }
}
void* new_aligned_nothrow(std::size_t n, std::align_val_t a) noexcept {
  if (void* p = ak_memalign(static_cast<std::size_t>(a), n)) return p;
  if (current_new_handler() == nullptr) return nullptr;
  try {
    return new_aligned_or_throw(n, a);
  } catch (...) {
    return nullptr;
  }
}
}  // namespace

#define AK_CXX __attribute__((visibility("default")))

// The throwing operator new is ak::detail::new_block, which calls new_failed only when the
// allocation failed (in the shared libraries, the linker makes the operators its address).
void* ak::detail::new_failed(std::size_t n) {
  return after_new_failed(n, [n] { return ak_malloc(n); });
}
#if !AK_LINKER_ALIASES
AK_CXX void* operator new(std::size_t n) {
  return ak::detail::new_block(n);
}
AK_CXX void* operator new[](std::size_t n) {
  return ak::detail::new_block(n);
}
#endif
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

#if !AK_LINKER_ALIASES
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
AK_CXX void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  ak_free(p);
}
AK_CXX void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  ak_free(p);
}
#endif
AK_CXX void operator delete(void* p, std::size_t n, std::align_val_t a) noexcept {
  ak_free_aligned_sized(p, static_cast<std::size_t>(a), n);
}
AK_CXX void operator delete[](void* p, std::size_t n, std::align_val_t a) noexcept {
  ak_free_aligned_sized(p, static_cast<std::size_t>(a), n);
}
