// One cell of the size grid (bench/run_size_grid.py): THREADS threads, each churning SLOTS
// pointers PAIRS times: it frees a random slot's block and allocates one of a log-uniform size in
// [LO, HI] there, writing its first and last byte. Prints the mean time of a free-malloc pair and
// the process's peak RSS as one JSON line. The allocator is whatever the process was started with
// (LD_PRELOAD), as for malloc_workloads.
//
//   size_grid LO HI THREADS SLOTS PAIRS
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "workloads/common.hpp"

namespace {

void churn(std::size_t lo, std::size_t hi, std::size_t slots, long pairs, int seed) {
  workloads::Rng rng(seed);
  std::vector<void*> slot(slots, nullptr);
  for (long i = 0; i < pairs; ++i) {
    void*& p = slot[rng.below(slots)];
    std::free(p);
    const std::size_t n = rng.inverse(lo, hi);
    p = std::malloc(n);
    workloads::touch(p, n);
  }
  for (void* p : slot) std::free(p);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: size_grid LO HI THREADS SLOTS PAIRS\n");
    return 2;
  }
  const std::size_t lo = std::strtoull(argv[1], nullptr, 0),
                    hi = std::strtoull(argv[2], nullptr, 0);
  const int threads = std::atoi(argv[3]);
  const std::size_t slots = std::strtoull(argv[4], nullptr, 0);
  const long pairs = std::atol(argv[5]);
  if (lo == 0 || hi < lo || threads < 1 || slots == 0 || pairs < 1) {
    std::fprintf(stderr, "size_grid: need 0 < LO <= HI, THREADS >= 1, SLOTS >= 1, PAIRS >= 1\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(churn, lo, hi, slots, pairs, t + 1);
  for (auto& t : pool) t.join();
  const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
  std::printf("{\"ns_per_pair\": %.2f, \"peak_rss_kib\": %ld}\n", took.count() / double(pairs),
              workloads::peak_rss_kib());
  return 0;
}
