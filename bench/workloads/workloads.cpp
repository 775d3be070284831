// The malloc workload driver and the project's own workloads (the standard suite's models are in
// standard_suite.cpp). Usage: malloc_workloads NAME [SCALE]  -> one JSON line: wall seconds and
// peak RSS. SCALE (larson, larson_sized, xmalloc, sh6bench, sh8bench): the fraction of their work
// to do, default 1.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"

namespace workloads {
double g_scale = 1;
namespace {

std::size_t small_size(std::mt19937& rng, std::size_t lo, std::size_t hi) {
  // Log-uniform between lo and hi: most requests small, a tail of larger ones.
  std::uniform_real_distribution<double> d(std::log2(double(lo)), std::log2(double(hi)));
  return std::size_t(std::exp2(d(rng)));
}

// Many short-lived threads, two at a time, each with its own burst of allocations.
void thread_churn() {
  for (int round = 0; round < 1500; ++round) {
    auto burst = [round](int id) {
      std::mt19937 rng(round * 2 + id);
      std::vector<void*> v;
      for (int i = 0; i < 4000; ++i) {
        const std::size_t n = small_size(rng, 8, 1024);
        v.push_back(std::malloc(n));
        touch(v.back(), n);
        if (i % 3 == 0) {
          std::free(v[v.size() / 2]);
          v[v.size() / 2] = std::malloc(32);
        }
      }
      for (void* p : v) std::free(p);
    };
    std::thread a(burst, 0), b(burst, 1);
    a.join();
    b.join();
  }
}

// Long-lived blocks replaced slowly while short-lived ones come and go around them.
void mixed_lifetimes() {
  std::mt19937 rng(3);
  std::vector<void*> longlived(100000);
  // Every block is written, as a program writes the objects it creates: blocks no one writes
  // measured only whether the allocator itself writes into freed blocks (jemalloc, which keeps
  // its free lists outside them, read 10.7 MiB for 42 MiB live; the others 46 to 53).
  auto fresh = [&rng] {
    const std::size_t n = small_size(rng, 16, 2048);
    void* p = std::malloc(n);
    touch(p, n);
    return p;
  };
  for (auto& p : longlived) p = fresh();
  for (int i = 0; i < 1'500'000; ++i) {
    void* tmp[4];
    for (auto& t : tmp) {
      const std::size_t n = small_size(rng, 8, 256);
      t = std::malloc(n);
      touch(t, n);
    }
    for (auto& t : tmp) std::free(t);
    if (i % 8 == 0) {
      auto& p = longlived[rng() % longlived.size()];
      std::free(p);
      p = fresh();
    }
  }
  for (void* p : longlived) std::free(p);
}

// Random sizes from 8 B to 16 KiB on two threads with a working set (rptest-like).
void random_sizes() {
  auto worker = [](int id) {
    std::mt19937 rng(10 + id);
    std::vector<void*> set(4000, nullptr);
    for (int i = 0; i < 7'500'000; ++i) {
      auto& p = set[rng() % set.size()];
      std::free(p);
      const std::size_t n = small_size(rng, 8, 16384);
      p = std::malloc(n);
      touch(p, n);
    }
    for (void* p : set) std::free(p);
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
}

// `rounds` of large_blocks' loop, each block written at both ends, or at every page (`dense`).
void large_blocks_loop(int rounds, bool dense) {
  std::mt19937 rng(5);
  std::vector<void*> set(8, nullptr);
  for (int i = 0; i < rounds; ++i) {
    auto& p = set[rng() % set.size()];
    std::free(p);
    const std::size_t n = (std::size_t(1) << 20) + rng() % (std::size_t(7) << 20);
    p = std::malloc(n);
    touch(p, n);
    for (std::size_t o = 0; dense && o < n; o += 4096) static_cast<volatile char*>(p)[o] = 1;
  }
  for (void* p : set) std::free(p);
}
// Blocks of several MiB, a few alive at a time (malloc-large-like).
void large_blocks() {
  large_blocks_loop(400'000, false);
}
// Not in the table (its time is page faults): large_blocks as a program that fills its buffers,
// to tell what large_blocks' peak RSS says (docs/benchmarks.md).
void large_blocks_dense() {
  large_blocks_loop(scaled(20'000), true);
}

// Not in the table (a case, not a suite's model): rounds of buffers of 256 KiB to 4 MiB, each
// allocated and filled a page at a time before the one before it is freed, and each round's 2 KiB
// larger than the last, as a program whose largest message or file creeps up. Every round frees
// a new largest size, which a guard modelled on glibc's threshold seals (docs/architecture.md,
// sealed freed blocks).
void creeping_largest() {
  static constexpr std::size_t kSizes[] = {262152,  393228,  589842,  884763,  1327144,
                                           1358645, 1359880, 2039820, 3059730, 3186193,
                                           3186696, 3190289, 4019762};
  const int rounds = scaled(1000);
  for (int round = 0; round < rounds; ++round) {
    char* prev = nullptr;
    for (std::size_t size : kSizes) {
      const std::size_t n = size + std::size_t(round) * 2048;
      auto* p = static_cast<char*>(std::malloc(n));
      for (std::size_t o = 0; o < n; o += 4096) static_cast<volatile char*>(p)[o] = 1;
      std::free(prev);
      prev = p;
    }
    std::free(prev);
  }
}

// `rounds` times, a slot of `slots` chosen at random is freed and given `take(rng, &bytes)`'s new
// block, written at both ends; every slot is freed at the end.
template <class Take>
void churn_slots(std::size_t slots, int rounds, std::uint64_t seed, Take take) {
  std::mt19937_64 rng(seed);
  std::vector<void*> live(slots, nullptr);
  for (int i = 0; i < rounds; ++i) {
    void*& p = live[rng() % live.size()];
    std::free(p);
    std::size_t bytes = 0;
    p = take(rng, &bytes);
    touch(p, bytes);
  }
  for (void* p : live) std::free(p);
}

// Not in the table (a case, not a suite's model): blocks aligned to 64 bytes .. 2 MiB, each one to
// three times its alignment, churned among 2,000 slots: buffers for direct I/O, SIMD and huge
// pages, and allocators built on malloc that align their chunks.
void aligned_blocks() {
  churn_slots(2000, scaled(2'000'000), 11, [](std::mt19937_64& rng, std::size_t* bytes) {
    const std::size_t align = std::size_t(64) << (rng() % 16);
    *bytes = align * (1 + rng() % 3);
    void* p = nullptr;
    if (posix_memalign(&p, align, *bytes) != 0) std::abort();
    return p;
  });
}

// Not in the table (a case): 1,000 live blocks of 1 KiB-1 MiB, freed and reallocated at random, as
// a cache or a server holding many large buffers.
void many_large_blocks() {
  churn_slots(1000, scaled(1'000'000), 12, [](std::mt19937_64& rng, std::size_t* bytes) {
    *bytes = 1024 + rng() % (std::size_t(1) << 20);
    return std::malloc(*bytes);
  });
}

// Not in the table (a case): the heap of a garbage-collected interpreter, modelled on Lua's, whose
// every allocation is a realloc (its allocator function). Each round builds 200,000 entries of
// three small objects (a 56-byte table, a 16-64-byte string, a 16-byte array), an array of the
// entries grown by doubling to 4 MiB and a string buffer doubled past 2 MiB; as it allocates, it
// sweeps the round before in allocation order, two objects per new one, reading each object's
// mark before its free, as an incremental collector frees garbage. Its cases: peak RSS (a few
// large buffers of many sizes live at a time, the rest freed, which the large-block cache keeps
// resident up to its budget), and time, which is where the allocator placed each generation: the
// sweep reads objects in allocation order, so blocks handed out far apart cost a cache miss each.
void gc_generations() {
  struct Generation {
    std::vector<void*> objects;
    char* array = nullptr;
    char* buffer = nullptr;
  };
  Generation old, cur;
  std::mt19937 rng(13);
  const int rounds = scaled(30);
  for (int round = 0; round <= rounds; ++round) {
    std::size_t swept = 0;
    auto sweep =
        [&](std::size_t n) {  // reads each object's mark, as a collector does, then frees it
          for (; n != 0 && swept < old.objects.size(); --n) {
            (void)*static_cast<volatile char*>(old.objects[swept]);
            std::free(old.objects[swept++]);
          }
        };
    auto take = [](void* p, std::size_t n) {
      auto* q = static_cast<char*>(std::realloc(p, n));
      touch(q, n);
      return q;
    };
    std::size_t capacity = 4;
    cur.array = take(nullptr, capacity * 16);
    for (std::size_t entry = 0; round < rounds && entry < 200'000; ++entry) {
      for (const std::size_t n : {std::size_t(56), 16 + rng() % 49, std::size_t(16)}) {
        cur.objects.push_back(take(nullptr, n));
        sweep(2);
      }
      if (entry == capacity) cur.array = take(cur.array, (capacity *= 2) * 16);
      cur.array[entry * 16] = 1;
    }
    std::size_t bytes = 1024;
    cur.buffer = take(nullptr, bytes);
    while (bytes < (std::size_t(2) << 20) + std::size_t(round) * 37'000)
      cur.buffer = take(cur.buffer, bytes *= 2);
    sweep(old.objects.size());
    std::free(old.array);
    std::free(old.buffer);
    old = std::move(cur);
    cur = Generation{};
  }
  std::free(old.array);
  std::free(old.buffer);
}

// Buffers grown by realloc in 10% steps, interleaved so they cannot all grow in place.
void realloc_growth() {
  for (int round = 0; round < 20; ++round) {
    std::vector<char*> bufs(200, nullptr);
    std::vector<std::size_t> sizes(200, 16);
    for (int step = 0; step < 110; ++step)
      for (std::size_t b = 0; b < bufs.size(); ++b) {
        sizes[b] += sizes[b] / 10 + 1;
        bufs[b] = static_cast<char*>(std::realloc(bufs[b], sizes[b]));
        bufs[b][sizes[b] - 1] = char(step);
      }
    for (char* p : bufs) std::free(p);
  }
}

// calloc of a large table that the program fills sparsely (a hash table, a bitmap, a histogram):
// sizes log-uniform from 8 to 128 MiB, one table at a time, every 8th page written, a few others
// read back as zero. Fresh pages must not be cleared by hand: an allocator that does writes 8x
// the pages the program does. The mean time of the calloc call alone is reported as calloc_us.
double g_calloc_us = -1;
void large_calloc() {
  constexpr int kTables = 400;
  constexpr std::size_t kPage = 4096, kStride = 8 * kPage;
  std::mt19937 rng(7);
  double total = 0;
  for (int i = 0; i < kTables; ++i) {
    const std::size_t n = small_size(rng, std::size_t(8) << 20, std::size_t(128) << 20);
    const auto t = std::chrono::steady_clock::now();
    auto* p = static_cast<volatile char*>(std::calloc(1, n));
    total +=
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t).count();
    if (p == nullptr) std::abort();
    for (std::size_t off = 0; off < n; off += kStride) p[off] = 1;
    for (int k = 0; k < 8; ++k)
      if (p[(rng() % (n / kPage)) * kPage + kPage / 2] != 0) std::abort();
    std::free(const_cast<char*>(p));
  }
  g_calloc_us = total / kTables;
}

}  // namespace

void register_classic(Registry& r) {
  r["thread_churn"] = thread_churn;
  r["mixed_lifetimes"] = mixed_lifetimes;
  r["random_sizes"] = random_sizes;
  r["large_blocks"] = large_blocks;
  r["large_blocks_dense"] = large_blocks_dense;
  r["realloc_growth"] = realloc_growth;
  r["creeping_largest"] = creeping_largest;
  r["aligned_blocks"] = aligned_blocks;
  r["many_large_blocks"] = many_large_blocks;
  r["gc_generations"] = gc_generations;
  r["large_calloc"] = large_calloc;
}

}  // namespace workloads

int main(int argc, char** argv) {
  workloads::Registry workloads;
  workloads::register_classic(workloads);
  workloads::register_standard(workloads);
  if (argc == 3) workloads::g_scale = std::atof(argv[2]);
  if (argc < 2 || argc > 3 || !workloads.count(argv[1]) || !(workloads::g_scale > 0)) {
    std::fprintf(stderr, "usage: malloc_workloads NAME [SCALE > 0]  (names:");
    for (auto& [name, fn] : workloads) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, ")\n");
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  workloads.at(argv[1])();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "{\"workload\": \"%s\", \"seconds\": %.6f, \"peak_rss_kib\": %ld, \"calloc_us\": %.3f}\n",
      argv[1], secs, workloads::peak_rss_kib(), workloads::g_calloc_us);
  return 0;
}
