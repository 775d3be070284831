// Where the tools find each other: the recorder library, the replay worker and liballockit
// are built next to the `allockit` executable.
#pragma once
#include <unistd.h>

#include <string>

namespace ak::trace {

inline std::string tools_dir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

}  // namespace ak::trace
