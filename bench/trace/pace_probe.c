/* A probe for the trace benchmark's fidelity table: how a program's own memory peak moves when
   its allocator calls run slower, as they do under the recorder. Preloaded, it samples RssAnon
   (/proc/self/statm) every millisecond from a thread of its own and, at exit, writes the peak
   above the first sample, in bytes, to the file PACE_PROBE_OUT names. With PACE_PROBE_DELAY_NS
   set, every malloc and free (glibc's, called directly) then spins that long. Never for real
   programs. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

extern void* __libc_malloc(size_t n);
extern void __libc_free(void* p);

static unsigned long long g_delay_ticks;
static long g_start, g_peak;
static volatile int g_done;

static inline void delay(void) {
  if (!g_delay_ticks) return;
  const unsigned long long t = __rdtsc();
  while (__rdtsc() - t < g_delay_ticks) _mm_pause();
}

void* malloc(size_t n) {
  void* p = __libc_malloc(n);
  delay();
  return p;
}

void free(void* p) {
  __libc_free(p);
  delay();
}

static long anon_bytes(void) {
  char b[128];
  const int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t k = read(fd, b, sizeof b - 1);
  close(fd);
  if (k <= 0) return 0;
  b[k] = 0;
  long size, resident, shared;
  if (sscanf(b, "%ld %ld %ld", &size, &resident, &shared) != 3) return 0;
  return (resident - shared) * sysconf(_SC_PAGESIZE);
}

static void sample(void) {
  const long v = anon_bytes() - g_start;
  if (v > g_peak) g_peak = v;
}

static void* sampler(void* unused) {
  (void)unused;
  const struct timespec ms = {0, 1000000};
  while (!g_done) {
    sample();
    nanosleep(&ms, NULL);
  }
  return NULL;
}

static unsigned long long ns_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

__attribute__((constructor)) static void start(void) {
  const char* d = getenv("PACE_PROBE_DELAY_NS");
  if (d && atol(d) > 0) {  // TSC ticks per ns, over 10 ms
    const unsigned long long n0 = ns_now(), t0 = __rdtsc();
    while (ns_now() - n0 < 10000000) {
    }
    const double per_ns = (double)(__rdtsc() - t0) / (double)(ns_now() - n0);
    g_delay_ticks = (unsigned long long)(per_ns * (double)atol(d));
  }
  g_start = anon_bytes();
  pthread_t t;
  if (pthread_create(&t, NULL, sampler, NULL) == 0) pthread_detach(t);
}

__attribute__((destructor)) static void finish(void) {
  sample();
  g_done = 1;
  const char* out = getenv("PACE_PROBE_OUT");
  if (!out) return;
  FILE* f = fopen(out, "w");
  if (!f) return;
  fprintf(f, "%ld\n", g_peak);
  fclose(f);
}
