/* Fills 64 MiB with 1 KiB blocks, frees them all, then does nothing but watch its own RSS.
   Usage: idle_purge_program SECONDS [threads|waiting] -> exit 0 if RSS fell by 40 MiB within
            SECONDS, else 1; with `threads`, two threads fill 32 MiB each and exit before the
            main thread frees every block (into the heaps those threads left); with `waiting`,
            two threads fill 32 MiB each, free it and wait, allocating nothing more;
          idle_purge_program young -> see young_big_free.
   Run under LD_PRELOAD=liballockit.so: only a background purge can return memory here. Once it
   has, prints the purge thread's nice value, if that thread exists. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Reads VmRSS with open/read, never malloc: the watch loop must not be allocator activity (which
   may purge by itself), or the test without a background purge would prove nothing. */
static long rss_kib(void) {
  char buf[4096];
  int fd = open("/proc/self/status", O_RDONLY);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  const char* line = strstr(buf, "VmRSS:");
  return line ? atol(line + 6) : -1;
}

/* Whether a thread named `name` exists now, by /proc/self/task/T/stat ("pid (comm) state ...");
   if so, sets *nice to its nice value, the 19th field (the 17th after the comm's ')'). */
static int find_thread(const char* name, long* nice) {
  DIR* dir = opendir("/proc/self/task");
  if (dir == NULL) return 0;
  int found = 0;
  struct dirent* e;
  while (!found && (e = readdir(dir)) != NULL) {
    char path[300], buf[1024];
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
    int fd = open(path, O_RDONLY);
    if (fd < 0) continue;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = 0;
    char* open_paren = strchr(buf, '(');
    char* close_paren = strrchr(buf, ')');
    if (open_paren == NULL || close_paren == NULL) continue;
    *close_paren = 0;
    if (strcmp(open_paren + 1, name) != 0) continue;
    char* field = close_paren + 2;
    for (int i = 3; i < 19 && field != NULL; ++i) {
      field = strchr(field, ' ');
      if (field != NULL) ++field;
    }
    *nice = field != NULL ? atol(field) : -100;
    found = 1;
  }
  closedir(dir);
  return found;
}

/* "young": frees a written 2 MiB block as soon as the process starts, then waits up to a second
   for the purge thread: exit 0 if it came. A young process starts none for cached memory, but a
   free that had to empty a block that big itself starts one. */
static int young_big_free(void) {
  enum { kBytes = 2 << 20 };
  static char* volatile block; /* volatile: the compiler may not drop the malloc, memset, free */
  block = malloc(kBytes);
  memset(block, 1, kBytes);
  free(block);
  for (int waited_ms = 0; waited_ms < 1000; waited_ms += 10) {
    long nice;
    if (find_thread("allockit-purge", &nice)) {
      printf("purge thread after %d ms\n", waited_ms);
      return 0;
    }
    usleep(10000);
  }
  printf("no purge thread within 1 s\n");
  return 1;
}

enum { kBlocks = 64 * 1024 };
static void* blocks[kBlocks];

/* Fills blocks[half * kBlocks / 2 ...] (a thread's start routine). */
static void* fill_half(void* half) {
  const int first = (int)(long)half * (kBlocks / 2);
  for (int i = first; i < first + kBlocks / 2; ++i) {
    blocks[i] = malloc(1000);
    memset(blocks[i], 1, 1000);
  }
  return NULL;
}

static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
/* 2: both threads filled; 3: the main thread read the peak; 5: both freed; 6: done. */
static int g_phase = 0;

/* Waits until g_phase is at least `phase`, then adds `step` to it. */
static void step_phase(int phase, int step) {
  pthread_mutex_lock(&g_mutex);
  while (g_phase < phase) pthread_cond_wait(&g_cond, &g_mutex);
  g_phase += step;
  pthread_cond_broadcast(&g_cond);
  pthread_mutex_unlock(&g_mutex);
}

/* Fills its half, frees it once the main thread has read the peak, then waits without
   allocating until the main thread is done. */
static void* fill_free_and_wait(void* half) {
  fill_half(half);
  step_phase(0, 1);
  step_phase(3, 0);
  const int first = (int)(long)half * (kBlocks / 2);
  for (int i = first; i < first + kBlocks / 2; ++i) free(blocks[i]);
  step_phase(3, 1);
  step_phase(6, 0);
  return NULL;
}

/* Whether RSS falls by 40 MiB from `peak` within `seconds`, watched without allocating: 0 if so
   (printing how), else 1. */
static int watch(long peak, double seconds) {
  for (double waited = 0; waited < seconds; waited += 0.05) {
    long now = rss_kib();
    if (peak - now >= 40 * 1024) {
      printf("rss %ld -> %ld KiB after %.2f s\n", peak, now, waited);
      long nice;
      if (find_thread("allockit-purge", &nice)) printf("thread allockit-purge nice %ld\n", nice);
      return 0;
    }
    usleep(50000);
  }
  printf("rss %ld -> %ld KiB: not returned within %.1f s\n", peak, rss_kib(), seconds);
  return 1;
}

/* "SECONDS waiting": two threads fill 32 MiB each, free it and wait, allocating nothing more;
   the main thread watches RSS, then lets them exit. */
static int watch_waiting_threads(double seconds) {
  pthread_t t[2];
  for (long i = 0; i < 2; ++i)
    if (pthread_create(&t[i], NULL, fill_free_and_wait, (void*)i) != 0) return 2;
  step_phase(2, 0);
  const long peak = rss_kib();
  step_phase(2, 1);
  step_phase(5, 0);
  const int rc = watch(peak, seconds);
  step_phase(5, 1);
  for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  return rc;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "young") == 0) return young_big_free();
  double seconds = argc > 1 ? atof(argv[1]) : 10;
  if (argc > 2 && strcmp(argv[2], "waiting") == 0) return watch_waiting_threads(seconds);
  if (argc > 2 && strcmp(argv[2], "threads") == 0) {
    pthread_t t[2];
    for (long i = 0; i < 2; ++i)
      if (pthread_create(&t[i], NULL, fill_half, (void*)i) != 0) return 2;
    for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  } else {
    fill_half((void*)0L);
    fill_half((void*)1L);
  }
  long peak = rss_kib();
  for (int i = 0; i < kBlocks; ++i) free(blocks[i]);
  return watch(peak, seconds);
}
