// A malloc shim for record_test.sh: says on which thread a replay makes malloc(777777), the
// pattern program's start marker, which the program's main thread calls, and which library
// served it. It appends "main NAME" or "thread NAME" (NAME: this library's file name, so copies
// under other names tell their runs apart) to the file ALLOCKIT_TEST_THREAD_PROBE names; glibc's
// malloc serves every call.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void* __libc_malloc(size_t n);

static const char g_anchor = 0;  // an address in this library, for dladdr

void* malloc(size_t n) {
  const char* path = n == 777777 ? getenv("ALLOCKIT_TEST_THREAD_PROBE") : NULL;
  if (path) {
    Dl_info self;
    const char* name = dladdr(&g_anchor, &self) && self.dli_fname ? self.dli_fname : "?";
    const char* slash = strrchr(name, '/');
    if (slash) name = slash + 1;
    const char* where = gettid() == getpid() ? "main" : "thread";
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      dprintf(fd, "%s %s\n", where, name);
      close(fd);
    }
  }
  return __libc_malloc(n);
}
