// ak_version(): the version of the library in the process (allockit/version.h).
#include "allockit/allockit.h"

extern "C" int ak_version(void) noexcept {
  return AK_VERSION;
}
