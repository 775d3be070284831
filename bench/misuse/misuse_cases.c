/* Classic allocator misuse, one case per run: `misuse_cases N` performs case N against whatever
   malloc the process has (LD_PRELOAD picks it) and exits 0 if the allocator let it pass. A case is
   *detected* when the allocator aborts the process (SIGABRT) with its own report; a SIGSEGV is a
   crash, not a detection. `misuse_cases list` prints the cases. Used by bench/run_misuse_bench.py.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Through volatile pointers, so the compiler cannot see (and drop or warn about) the misuse. */
static void* (*volatile malloc_)(size_t) = malloc;
static void* (*volatile calloc_)(size_t, size_t) = calloc;
static void* (*volatile realloc_)(void*, size_t) = realloc;
static void (*volatile free_)(void*) = free;
static size_t (*volatile usable_)(void*) = malloc_usable_size;

static char g_global[64];
static void* offset(void* p, long n) {
  return (char*)p + n;
}

static void* other_thread_free(void* p) {
  free_(p);
  return NULL;
}

static int run(int c) {
  char stack[64];
  void *p, *q;
  switch (c) {
    case 1:
      p = malloc_(24);
      free_(p);
      free_(p);
      break; /* double free, small */
    case 2:
      p = malloc_(8);
      free_(p);
      free_(p);
      break; /* double free, 8 B */
    case 3:
      p = malloc_(1000);
      free_(p);
      free_(p);
      break; /* double free, 1 KB */
    case 4:
      p = malloc_(1 << 20);
      free_(p);
      free_(p);
      break; /* double free, 1 MB */
    case 5:
      p = malloc_(24);
      q = malloc_(24);
      free_(p);
      free_(q);
      free_(p);
      break; /* A B A */
    case 6:
      p = calloc_(4, 8);
      free_(p);
      free_(p);
      break; /* double free, calloc */
    case 7:
      if (posix_memalign(&p, 64, 100)) return 2;
      free_(p);
      free_(p);
      break; /* aligned */
    case 8: {
      pthread_t t;
      p = malloc_(48);
      free_(p);
      pthread_create(&t, NULL, other_thread_free, p);
      pthread_join(t, NULL);
      break;
    }
    case 9:
      free_(stack);
      break; /* stack pointer */
    case 10:
      free_(g_global);
      break; /* global */
    case 11:
      p = malloc_(64);
      free_(offset(p, 16));
      break; /* interior, small */
    case 12:
      p = malloc_(1 << 20);
      free_(offset(p, 4096));
      break; /* interior, large */
    case 13:
      p = malloc_(64);
      free_(offset(p, 1));
      break; /* misaligned */
    case 14:
      p = malloc_(64);
      free_(offset(p, -16));
      break; /* header address */
    case 15:
      p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      free_(p);
      break; /* foreign mapping */
    case 16:
      p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      free_(offset(p, 16));
      break; /* foreign, unaligned page */
    case 17:
      free_((void*)(uintptr_t)0x7f0000dead00);
      break; /* wild pointer */
    case 18: {
      void* v[4];
      memset(v, 0x41, sizeof v);
      free_(v[1]);
      break;
    } /* uninitialised */
    case 19:
      p = malloc_(24);
      free_(p);
      p = realloc_(p, 48);
      break; /* realloc freed, small */
    case 20:
      p = malloc_(1 << 20);
      free_(p);
      p = realloc_(p, 2 << 20);
      break; /* realloc freed, large */
    case 21:
      p = realloc_(stack, 100);
      break; /* realloc stack */
    case 22:
      p = malloc_(64);
      p = realloc_(offset(p, 16), 200);
      break; /* realloc interior */
    case 23:
      p = malloc_(64);
      p = realloc_(offset(p, 1), 200);
      break; /* realloc misaligned */
    case 24:
      p = realloc_(g_global, 100);
      break; /* realloc global */
    case 25:
      p = malloc_(24);
      q = realloc_(p, 100000);
      free_(p);
      (void)q;
      break; /* free stale after move */
    case 26: {
      void* v[4];
      memset(v, 0x41, sizeof v);
      p = realloc_(v[2], 64);
      break;
    } /* realloc uninit */
    case 27:
      (void)usable_(stack);
      break; /* usable_size stack */
    case 28:
      p = malloc_(64);
      (void)usable_(offset(p, 1));
      break; /* usable_size misaligned */
    case 29:
      (void)usable_((void*)(uintptr_t)0x7f0000dead00);
      break; /* usable_size wild */
    case 30:
      p = malloc_(1 << 20);
      free_(p);
      (void)usable_(p);
      break; /* usable_size freed large */
    default:
      return 2;
  }
  return 0;
}

static const char* const kNames[] = {"",
                                     "double free 24 B",
                                     "double free 8 B",
                                     "double free 1 KB",
                                     "double free 1 MB",
                                     "double free A B A",
                                     "double free calloc",
                                     "double free posix_memalign",
                                     "double free on another thread",
                                     "free stack pointer",
                                     "free global",
                                     "free interior (small)",
                                     "free interior (large)",
                                     "free misaligned",
                                     "free header address",
                                     "free foreign mapping",
                                     "free inside foreign mapping",
                                     "free wild pointer",
                                     "free uninitialised pointer",
                                     "realloc freed (small)",
                                     "realloc freed (large)",
                                     "realloc stack pointer",
                                     "realloc interior",
                                     "realloc misaligned",
                                     "realloc global",
                                     "free stale pointer after move",
                                     "realloc uninitialised pointer",
                                     "malloc_usable_size stack",
                                     "malloc_usable_size misaligned",
                                     "malloc_usable_size wild",
                                     "malloc_usable_size freed (large)"};

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (strcmp(argv[1], "list") == 0) {
    for (int i = 1; i <= 30; ++i) printf("%d\t%s\n", i, kNames[i]);
    return 0;
  }
  return run(atoi(argv[1]));
}
