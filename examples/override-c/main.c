/* A C program linked against liballockit, the overriding library: plain malloc, calloc, realloc
   and free must be allockit's. It proves it through allockit's own statistics: the bytes in live
   large blocks (ak_stats.large_bytes) move when the program calls plain malloc and free. */
#include <allockit/allockit.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void check(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "FAIL: %s\n", what);
    ++failures;
  }
}

static size_t large_bytes(void) {
  ak_stats s;
  ak_stats_get(&s);
  return s.large_bytes;
}

int main(void) {
  size_t before = large_bytes();
  char* big = malloc(8 << 20); /* 8 MiB: a large block, counted exactly */
  check(big != NULL, "malloc(8 MiB)");
  memset(big, 1, 8 << 20);
  check(large_bytes() >= before + (8 << 20), "plain malloc is allockit's (large_bytes grew)");
  check(ak_malloc_usable_size(big) >= (8 << 20), "allockit knows the block");
  free(big);
  check(large_bytes() == before, "plain free is allockit's (large_bytes fell back)");

  /* Small blocks: every one is allockit's and survives a realloc chain. */
  char* s = NULL;
  for (int i = 1; i <= 1000; ++i) {
    s = realloc(s, (size_t)i);
    s[i - 1] = (char)i;
  }
  int intact = 1;
  for (int i = 1; i <= 1000; ++i) intact &= s[i - 1] == (char)i;
  check(intact, "realloc keeps the contents");
  check(ak_malloc_usable_size(s) >= 1000, "realloc'd block is allockit's");
  free(s);
  int* zeros = calloc(1 << 16, sizeof(int));
  int zero = 1;
  for (int i = 0; i < (1 << 16); ++i) zero &= zeros[i] == 0;
  check(zeros != NULL && zero, "calloc zeroes");
  free(zeros);

  if (failures) return 1;
  printf("override-c: ok (allockit %d)\n", ak_version());
  return 0;
}
