// Figures for people, as the tools print them: byte counts and durations. Header-only.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace ak::trace {

// "812 B", "14.8 KiB", "30.1 MiB", "12.0 GiB": the unit where the figure reaches 10.
inline std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= (10ull << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / (1ull << 30));
  else if (b >= (10ull << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1ull << 20));
  else if (b >= (10ull << 10))
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / (1ull << 10));
  else
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

// "3.51 MiB": memory sizes compared side by side (RSS), always in MiB.
inline std::string mib(uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(b) / 1048576.0);
  return buf;
}

// "178 ns", "14.3 us", "1.22 ms", "2.05 s".
inline std::string human_time(uint64_t ns) {
  char buf[32];
  if (ns >= 1000000000ull)
    std::snprintf(buf, sizeof buf, "%.2f s", static_cast<double>(ns) / 1e9);
  else if (ns >= 1000000)
    std::snprintf(buf, sizeof buf, "%.2f ms", static_cast<double>(ns) / 1e6);
  else if (ns >= 1000)
    std::snprintf(buf, sizeof buf, "%.1f us", static_cast<double>(ns) / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%llu ns", static_cast<unsigned long long>(ns));
  return buf;
}

}  // namespace ak::trace
