/* Fills 64 MiB with 1 KiB blocks, frees them all, then does nothing but watch its own RSS.
   Usage: idle_purge_program SECONDS -> exit 0 if RSS fell by 40 MiB within SECONDS, else 1.
   Run under LD_PRELOAD=liballockit.so: only a background purge can return memory here. */
#include <fcntl.h>
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

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 10;
  enum { kBlocks = 64 * 1024 };
  static void* blocks[kBlocks];
  for (int i = 0; i < kBlocks; ++i) {
    blocks[i] = malloc(1000);
    memset(blocks[i], 1, 1000);
  }
  long peak = rss_kib();
  for (int i = 0; i < kBlocks; ++i) free(blocks[i]);
  for (double waited = 0; waited < seconds; waited += 0.05) {
    long now = rss_kib();
    if (peak - now >= 40 * 1024) {
      printf("rss %ld -> %ld KiB after %.2f s\n", peak, now, waited);
      return 0;
    }
    usleep(50000);
  }
  printf("rss %ld -> %ld KiB: not returned within %.1f s\n", peak, rss_kib(), seconds);
  return 1;
}
