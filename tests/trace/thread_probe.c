// A malloc shim for record_test.sh: says on which thread a replay makes malloc(777777), the
// pattern program's start marker, which the program's main thread calls. It appends "main" or
// "thread" to the file ALLOCKIT_TEST_THREAD_PROBE names; glibc's malloc serves every call.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void* __libc_malloc(size_t n);

void* malloc(size_t n) {
  const char* path = n == 777777 ? getenv("ALLOCKIT_TEST_THREAD_PROBE") : NULL;
  if (path) {
    const char* where = gettid() == getpid() ? "main\n" : "thread\n";
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      (void)!write(fd, where, strlen(where));
      close(fd);
    }
  }
  return __libc_malloc(n);
}
