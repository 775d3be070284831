// Pool benchmark driver. Google Benchmark flags as usual, plus one extra mode:
//   pool_bench --rss-list=N --family=NAME   prints resident bytes per std::list<int> node as JSON.
#include <cstdio>
#include <cstring>
#include <string>

#include "pool/contenders.hpp"

namespace bench {
void RegisterObjectSuites();
void RegisterContainerSuites();
long RssPerListNode(const std::string& family, long n, double* per_node);
}  // namespace bench

int main(int argc, char** argv) {
  long rss_n = 0;
  std::string family;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--rss-list=", 11) == 0) rss_n = std::atol(argv[i] + 11);
    if (std::strncmp(argv[i], "--family=", 9) == 0) family = argv[i] + 9;
  }
  if (rss_n > 0) {
    double per_node = 0;
    if (bench::RssPerListNode(family, rss_n, &per_node) != 0) {
      std::fprintf(stderr, "pool_bench: unknown --family=%s\n", family.c_str());
      return 2;
    }
    std::printf("{\"family\": \"%s\", \"elements\": %ld, \"rss_bytes_per_node\": %.3f}\n",
                family.c_str(), rss_n, per_node);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  bench::RegisterObjectSuites();
  bench::RegisterContainerSuites();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
