// Whether an address can be read, asked of the kernel: write(2) of one byte from it fails with
// EFAULT when it cannot, so a test probes sealed or guard pages without taking a signal.
#pragma once

#include <unistd.h>

#include <cstdlib>

namespace ak::testing {

inline bool readable(const void* p) {
  static int fds[2] = {-1, -1};
  if (fds[0] < 0 && pipe(fds) != 0) std::abort();
  const bool ok = write(fds[1], p, 1) == 1;
  char c;
  if (ok && read(fds[0], &c, 1) != 1) std::abort();
  return ok;
}

}  // namespace ak::testing
