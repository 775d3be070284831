/* An allocator that does (almost) nothing, for measuring the replayer's own cost: allocation
   bumps an atomic offset through a 64 GiB MAP_NORESERVE reservation, free does nothing. A
   16-byte header keeps the size so realloc can copy. Never for real programs: nothing is reused. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

static char* g_base;
static _Atomic size_t g_off;
static const size_t kReserve = 64ull << 30;

static void* bump(size_t n, size_t align) {
  if (!g_base) {
    void* m = mmap(NULL, kReserve, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return NULL;
    char* expected = NULL;
    if (!__atomic_compare_exchange_n(&g_base, &expected, (char*)m, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
      munmap(m, kReserve);
  }
  if (align < 16) align = 16;
  size_t need = ((n + 15) & ~(size_t)15) + align + 16;
  size_t off = atomic_fetch_add_explicit(&g_off, need, memory_order_relaxed);
  if (off + need > kReserve) {
    errno = ENOMEM;
    return NULL;
  }
  char* p = g_base + off + 16;
  p = (char*)(((size_t)p + align - 1) & ~(align - 1));
  ((size_t*)p)[-1] = n;
  return p;
}

void* malloc(size_t n) {
  return bump(n, 16);
}
void free(void* p) {
  (void)p;
}
void* calloc(size_t n, size_t s) {
  if (s && n > (size_t)-1 / s) {
    errno = ENOMEM;
    return NULL;
  }
  return bump(n * s, 16); /* fresh pages are zero */
}
void* realloc(void* old, size_t n) {
  void* p = bump(n, 16);
  if (p && old) {
    size_t was = ((size_t*)old)[-1];
    memcpy(p, old, was < n ? was : n);
  }
  return p;
}
void* reallocarray(void* old, size_t n, size_t s) {
  if (s && n > (size_t)-1 / s) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(old, n * s);
}
int posix_memalign(void** out, size_t align, size_t n) {
  void* p = bump(n, align);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
void* aligned_alloc(size_t align, size_t n) {
  return bump(n, align);
}
void* memalign(size_t align, size_t n) {
  return bump(n, align);
}
void* valloc(size_t n) {
  return bump(n, 4096);
}
void* pvalloc(size_t n) {
  return bump((n + 4095) & ~(size_t)4095, 4096);
}
size_t malloc_usable_size(void* p) {
  return p ? ((size_t*)p)[-1] : 0;
}
