// Helpers shared by the malloc workloads (workloads.cpp, standard_suite.cpp) and the size grid
// (bench/grid/size_grid.cpp): a registry of named workloads, memory touching, size distributions,
// a tiny fast RNG and the peak RSS. Workloads call plain malloc/free, so the allocator is whatever
// the process was started with (LD_PRELOAD).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>

namespace workloads {

using Registry = std::map<std::string, std::function<void()>>;

// The driver's optional SCALE argument (default 1): the models that read it do that fraction of
// their work (the trace benchmark records short runs of larson and xmalloc).
extern double g_scale;
inline int scaled(int n) {
  const int k = int(n * g_scale);
  return k > 0 ? k : 1;
}
void register_classic(Registry& r);   // workloads.cpp: the project's own
void register_standard(Registry& r);  // standard_suite.cpp: models of the field's suites

// Writes the first and last byte of [p, p+n): the block is really used, its first and last
// pages resident, as a program that fills in a header and a terminator.
inline void touch(void* p, std::size_t n) {
  if (n == 0) return;
  auto* c = static_cast<volatile char*>(p);
  c[0] = 1;
  c[n - 1] = 1;
}

// Peak resident bytes of this process image, in KiB: VmHWM from /proc/self/status. Not
// getrusage's ru_maxrss, which Linux carries across execve, so a child of a 15 MiB Python
// launcher would report at least 15 MiB whatever it did.
inline long peak_rss_kib() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
  std::fclose(f);
  return kib;
}

// xorshift64*: cheap enough that the RNG never dominates a malloc loop; deterministic per seed.
struct Rng {
  std::uint64_t s;
  explicit Rng(std::uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  std::uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ull;
  }
  std::size_t below(std::size_t n) { return std::size_t(next() % n); }
  std::size_t range(std::size_t lo, std::size_t hi) { return lo + below(hi - lo + 1); }
  double unit() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
  // Density proportional to 1/x on [lo, hi] (log-uniform): glibc's bench-malloc-thread sizes.
  std::size_t inverse(std::size_t lo, std::size_t hi) {
    return std::size_t(double(lo) * std::pow(double(hi) / double(lo), unit()));
  }
};

}  // namespace workloads
