/* allockit C ABI. Every function is prefixed ak_; the header is valid C and C++. */
#ifndef ALLOCKIT_ALLOCKIT_H
#define ALLOCKIT_ALLOCKIT_H

#include <stddef.h>

#include "allockit/version.h"

/* The allocation and stats functions never throw: C++ callers may tail-call them from noexcept
   code (the C++ operators of the override do). */
#ifdef __cplusplus
#define AK_NOTHROW noexcept
extern "C" {
#else
#define AK_NOTHROW
#endif

/* The version of the allockit library in the process: AK_VERSION's encoding (version.h). */
int ak_version(void) AK_NOTHROW;

/* ---- General-purpose allocation (liballockit) ----------------------------------------------
   glibc semantics: malloc(0) returns a unique pointer; free(NULL) does nothing; realloc(NULL, n)
   is malloc(n); realloc(p, 0) frees p and returns NULL; failures return NULL with errno ENOMEM
   (EINVAL for a bad alignment; posix_memalign returns the code instead). memalign rounds a
   non-power-of-two alignment up, as glibc does. Every pointer passed in must come from these
   functions: an invalid, misaligned or double free aborts with a message naming the call.
   Memory is 16-byte aligned (8 for requests of 8 bytes or less). Thread-safe. */
void* ak_malloc(size_t size) AK_NOTHROW;
void ak_free(void* p) AK_NOTHROW;
void* ak_calloc(size_t n, size_t size) AK_NOTHROW;
void* ak_realloc(void* p, size_t size) AK_NOTHROW;
void* ak_reallocarray(void* p, size_t n, size_t size) AK_NOTHROW;
int ak_posix_memalign(void** out, size_t align, size_t size) AK_NOTHROW;
void* ak_aligned_alloc(size_t align, size_t size) AK_NOTHROW;
void* ak_memalign(size_t align, size_t size) AK_NOTHROW;
void* ak_valloc(size_t size) AK_NOTHROW;
void* ak_pvalloc(size_t size) AK_NOTHROW;
size_t ak_malloc_usable_size(void* p) AK_NOTHROW;
/* C23's free_sized and free_aligned_sized: free p, whose request was size (and alignment align).
   A size larger than the block, or p not aligned to align, is reported and aborts; the secure
   build requires the size requested exactly. */
void ak_free_sized(void* p, size_t size) AK_NOTHROW;
void ak_free_aligned_sized(void* p, size_t align, size_t size) AK_NOTHROW;
/* Returns cached free memory to the OS at once; returns 1 if any was released. */
int ak_malloc_trim(size_t pad) AK_NOTHROW;

/* Returns memory to the OS: with force, every cached empty slab and cached large mapping at once
   (what malloc_trim(0) does); without, only what has been idle longer than the purge delay
   (ALLOCKIT_PURGE_DELAY_MS, default 1000 ms; a background thread does this anyway unless
   ALLOCKIT_BACKGROUND_PURGE=0). Either way it first hands the calling thread's batched frees of
   other threads' blocks to their owners. Returns the bytes given back. Thread-safe. */
size_t ak_collect(int force) AK_NOTHROW;

/* A snapshot of liballockit's memory. Pool figures are per slab (64 KiB small, 2 MiB medium):
   `allocated` counts live large blocks exactly and pooled blocks by the capacity of the slabs
   holding them (an upper bound: exact pooled counts would cost a counter on the fast path).
   `resident` measures pool regions with mincore and counts live large mappings whole. Thread-safe;
   other threads may change the numbers while they are read. */
#define AK_STATS_MAX_CLASSES 64
typedef struct ak_stats {
  size_t mapped;    /* address space reserved from the OS */
  size_t resident;  /* of it, bytes in RAM */
  size_t active;    /* slabs holding blocks, plus live large mappings */
  size_t allocated; /* see above */
  size_t large_blocks, large_bytes, large_cached_bytes;
  size_t slabs_in_use, slabs_cached;
  size_t starter_slabs; /* of slabs_in_use, 0 or 1: the slab a process's first small blocks of
                           every class share (no class counts it) */
  size_t heaps;         /* thread heaps created */
  size_t class_count;
  struct {
    size_t block_size, slabs;
  } classes[AK_STATS_MAX_CLASSES];
} ak_stats;
void ak_stats_get(ak_stats* out) AK_NOTHROW;
/* Writes the stats as JSON like snprintf: at most `size` bytes with the NUL, returns the length
   the whole text needs. Never allocates. */
size_t ak_stats_json(char* buf, size_t size) AK_NOTHROW;
/* Prints the stats on stderr (write(2), no allocation). ALLOCKIT_STATS=1 does this at exit. */
void ak_stats_print(void) AK_NOTHROW;

/* An arena (see arena.hpp): bump allocation, freed all at once by ak_arena_reset. Not thread-safe.
 */
typedef struct ak_arena ak_arena;

/* Creates an arena whose standard chunks hold chunk_bytes (0: 64 KiB). Returns NULL when
   chunk_bytes is outside [4 KiB, 1 GiB] or memory is exhausted. */
ak_arena* ak_arena_create(size_t chunk_bytes);
/* Returns size bytes aligned to align, or NULL when align is not a power of two or memory is
   exhausted; the arena stays usable either way. */
void* ak_arena_alloc(ak_arena* arena, size_t size, size_t align);
/* Frees every allocation of the arena at once and keeps its chunks for reuse. */
void ak_arena_reset(ak_arena* arena);
/* Frees the arena and returns its chunks; NULL is ignored. */
void ak_arena_destroy(ak_arena* arena);

/* A pool of fixed-size blocks (see block_pool.hpp): O(1) allocation and free, no per-block
   header. Not thread-safe. */
typedef struct ak_pool ak_pool;

/* Creates a pool of block_size-byte blocks aligned to align (0: 16). Returns NULL when
   block_size is 0 or above 1 GiB, align is not a power of two up to 1 MiB, or memory is
   exhausted. */
ak_pool* ak_pool_create(size_t block_size, size_t align);
/* Returns a block, or NULL when memory is exhausted. */
void* ak_pool_alloc(ak_pool* pool);
/* Returns a block of this pool to it; NULL is ignored. A block of another pool, or one freed
   twice, aborts with a message in checked pools (debug builds). */
void ak_pool_free(ak_pool* pool, void* p);
/* Frees the pool and every block it holds; NULL is ignored. */
void ak_pool_destroy(ak_pool* pool);

#ifdef __cplusplus
}
#endif

#endif /* ALLOCKIT_ALLOCKIT_H */
