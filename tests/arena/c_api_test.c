/* The arena and pool C ABI, compiled as C: creation, allocation, alignment and size errors,
   reuse, reset and destroy. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "allockit/allockit.h"

#define EXPECT(cond)                                                     \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                          \
    }                                                                    \
  } while (0)

int main(void) {
  ak_arena* a = ak_arena_create(0);
  EXPECT(a != NULL);
  char* p = (char*)ak_arena_alloc(a, 100, 16);
  EXPECT(p != NULL && ((uintptr_t)p % 16) == 0);
  memset(p, 1, 100);
  EXPECT(ak_arena_alloc(a, 8, 3) == NULL);    /* bad alignment */
  EXPECT(ak_arena_alloc(NULL, 8, 8) == NULL); /* no arena */
  ak_arena_reset(a);
  EXPECT(ak_arena_alloc(a, 100, 16) == p); /* reset reuses the chunk */
  EXPECT(ak_arena_create(10) == NULL);     /* chunk size out of range */
  ak_arena_destroy(a);
  ak_arena_destroy(NULL);

  ak_pool* pool = ak_pool_create(48, 0);
  EXPECT(pool != NULL);
  char* b1 = (char*)ak_pool_alloc(pool);
  char* b2 = (char*)ak_pool_alloc(pool);
  EXPECT(b1 && b2 && b1 != b2 && ((uintptr_t)b1 % 16) == 0 && ((uintptr_t)b2 % 16) == 0);
  memset(b1, 1, 48);
  memset(b2, 2, 48);
  ak_pool_free(pool, b1);
  EXPECT(ak_pool_alloc(pool) == b1); /* a freed block is reused first */
  ak_pool_free(pool, NULL);
  EXPECT(ak_pool_alloc(NULL) == NULL);
  EXPECT(ak_pool_create(0, 0) == NULL);  /* no size */
  EXPECT(ak_pool_create(64, 3) == NULL); /* bad alignment */
  ak_pool_destroy(pool);
  ak_pool_destroy(NULL);
  puts("c api ok");
  return 0;
}
