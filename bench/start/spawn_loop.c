/* Starts one program N times in a row and prints the mean wall time per process in
 * microseconds: the cost of starting (and ending) a short process under an allocator.
 * Usage: spawn_loop N PRELOAD|- PROGRAM [ARGS...]   ("-": no LD_PRELOAD, the system malloc)
 * Each child gets LD_PRELOAD=PRELOAD (and nothing else changed); its output goes to /dev/null.
 * A child that fails stops the loop with its exit status. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "preload_env.h"

int main(int argc, char** argv) {
  if (argc < 4 || atoi(argv[1]) <= 0) {
    fprintf(stderr, "usage: spawn_loop N PRELOAD|- PROGRAM [ARGS...]\n");
    return 2;
  }
  const int n = atoi(argv[1]);
  char** env = preload_env(argv[2]);
  if (env == NULL) return 2;
  posix_spawn_file_actions_t io;
  posix_spawn_file_actions_init(&io);
  posix_spawn_file_actions_addopen(&io, 1, "/dev/null", O_WRONLY, 0);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < n; ++i) {
    pid_t pid;
    if (posix_spawnp(&pid, argv[3], &io, NULL, argv + 3, env) != 0) {
      perror("spawn_loop: posix_spawn");
      return 1;
    }
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "spawn_loop: %s failed (status %d)\n", argv[3], status);
      return 1;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3;
  printf("%.3f\n", us / n);
  return 0;
}
