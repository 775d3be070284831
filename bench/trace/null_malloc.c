/* An allocator that does (almost) nothing, for measuring the replayer's own cost: allocation
   bumps an atomic offset through a 64 GiB MAP_NORESERVE reservation, free does nothing. Until
   the replay worker calls allockit_replay_begin(), a 16-byte header keeps each size so realloc
   copies correctly for the process's own start-up; from then on no memory is written at all
   (no header, no copy), so replayed calls cause no page faults. Never for real programs. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

static char* g_base;
static _Atomic size_t g_off;
static const size_t kReserve = 64ull << 30;
static int g_replaying;

void allockit_replay_begin(void) {
  g_replaying = 1;
}

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
  /* Each thread bumps through its own 64 MiB piece; only taking a piece is atomic. */
  static __thread __attribute__((tls_model("initial-exec"))) size_t pos, end;
  if (end - pos < need) {
    size_t piece = need > (64u << 20) ? need : (64u << 20);
    size_t off = atomic_fetch_add_explicit(&g_off, piece, memory_order_relaxed);
    if (off + piece > kReserve) {
      errno = ENOMEM;
      return NULL;
    }
    pos = off;
    end = off + piece;
  }
  size_t off = pos;
  pos += need;
  char* p = g_base + off + 16;
  p = (char*)(((size_t)p + align - 1) & ~(align - 1));
  if (!g_replaying) ((size_t*)p)[-1] = n;
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
  if (p && old && !g_replaying) {
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
