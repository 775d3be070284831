/* allockit C ABI. Every function is prefixed ak_; the header is valid C and C++. */
#ifndef ALLOCKIT_ALLOCKIT_H
#define ALLOCKIT_ALLOCKIT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif

#endif /* ALLOCKIT_ALLOCKIT_H */
