// The sink for core/check.hpp messages: write(2) to stderr and abort(). Never allocates, so it is
// safe from inside the allocator and from any thread.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "core/check.hpp"

namespace ak::detail {

void report_write(const char* msg, std::size_t len) noexcept {
  const int saved = errno;
  while (len > 0) {
    const ssize_t n = ::write(STDERR_FILENO, msg, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    msg += n;
    len -= std::size_t(n);
  }
  errno = saved;
}

void report_abort() noexcept {
  std::abort();
}

}  // namespace ak::detail
