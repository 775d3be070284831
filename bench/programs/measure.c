/* Runs one program under an allocator and prints what it cost, as one JSON line on stdout:
 * wall, user and system seconds and the peak resident set (KiB) of the program alone.
 * Usage: measure PRELOAD|- PROGRAM [ARGS...]   ("-": no LD_PRELOAD, the system malloc)
 * The program gets LD_PRELOAD=PRELOAD (nothing else changed) and inherits stdin; its stdout goes
 * to /dev/null. A small launcher rather than Python's subprocess: Linux carries a process's peak
 * RSS across fork and execve, so a child of a 15 MiB Python would report at least 15 MiB; this
 * one's child starts from about 1 MiB, the same under every allocator. Exit status: the
 * program's (128 + the signal when one killed it). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../start/preload_env.h"

static double seconds(struct timeval t) {
  return (double)t.tv_sec + (double)t.tv_usec / 1e6;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: measure PRELOAD|- PROGRAM [ARGS...]\n");
    return 2;
  }
  char** env = preload_env(argv[1]);
  if (env == NULL) {
    perror("measure");
    return 2;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pid = fork();
  if (pid < 0) {
    perror("measure: fork");
    return 2;
  }
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDOUT_FILENO);
    execvpe(argv[2], argv + 2, env);
    fprintf(stderr, "measure: cannot run %s: %s\n", argv[2], strerror(errno));
    _exit(127);
  }
  int status = 0;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) < 0) {
    perror("measure: wait4");
    return 2;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  printf("{\"wall\": %.6f, \"user\": %.6f, \"sys\": %.6f, \"maxrss_kib\": %ld, \"status\": %d}\n",
         wall, seconds(ru.ru_utime), seconds(ru.ru_stime), ru.ru_maxrss, code);
  return code;
}
