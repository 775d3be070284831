// Threads of the test process, counted from /proc (the allocator's background purger among them).
#pragma once

#include <dirent.h>

namespace ak::testing {

// The threads of this process now, or -1 when /proc cannot be read.
inline int threads_of_this_process() {
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return -1;
  int n = 0;
  while (const dirent* e = readdir(dir))
    if (e->d_name[0] != '.') ++n;
  closedir(dir);
  return n;
}

}  // namespace ak::testing
