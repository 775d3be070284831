// A preloaded library that kills its process with SIGSEGV as it loads: a run that crashes, for
// the soak runner's test (soak_test.py).
#include <signal.h>

__attribute__((constructor)) static void crash_at_load(void) {
  raise(SIGSEGV);
}
