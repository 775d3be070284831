// Container suites from issue 2: std::list<int> (10M push_back, iterate, clear, each timed), the
// dictionaries (unordered_map<int,string> 10M, map<int,int> 1M), and 8 map jobs on 2 threads.
// Every allocator family is plugged into the same container code through Family::make<C>().
#include <atomic>
#include <chrono>
#include <list>
#include <map>
#include <memory_resource>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "pool/contenders.hpp"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Allocator families. Each gives list/umap/map types and builds an empty container.
template <template <class> class A>
struct StdFamily {
  template <class T>
  using List = std::list<T, A<T>>;
  template <class K, class V>
  using UMap = std::unordered_map<K, V, std::hash<K>, std::equal_to<K>, A<std::pair<const K, V>>>;
  template <class K, class V>
  using Map = std::map<K, V, std::less<K>, A<std::pair<const K, V>>>;
  template <class C>
  static C make() {
    return C();
  }
};

struct StdAllocator : StdFamily<std::allocator> {
  static constexpr const char* kName = "std_allocator";
};
struct AkPoolAllocator : StdFamily<ak::pool_allocator> {
  static constexpr const char* kName = "ak_pool_allocator";
};
struct BoostFastPoolAllocator : StdFamily<boost::fast_pool_allocator> {
  static constexpr const char* kName = "boost_fast_pool_allocator";
};

template <class Resource>
struct PmrFamily {
  template <class T>
  using List = std::pmr::list<T>;
  template <class K, class V>
  using UMap = std::pmr::unordered_map<K, V>;
  template <class K, class V>
  using Map = std::pmr::map<K, V>;
  static Resource* resource() {
    static Resource* r = new Resource();  // one per family, shared by all its containers
    return r;
  }
  template <class C>
  static C make() {
    return C(resource());
  }
};
struct PmrUnsyncFamily : PmrFamily<std::pmr::unsynchronized_pool_resource> {
  static constexpr const char* kName = "pmr_unsynchronized_pool";
};
struct PmrSyncFamily : PmrFamily<std::pmr::synchronized_pool_resource> {
  static constexpr const char* kName = "pmr_synchronized_pool";
};
struct AkPoolResource : PmrFamily<ak::pool_resource> {
  static constexpr const char* kName = "ak_pool_resource";
};

void report(benchmark::State& state, double insert, double iterate, double clear) {
  state.SetIterationTime((insert + iterate + clear) / 1000.0);
  state.counters["insert_ms"] = insert;
  state.counters["iterate_ms"] = iterate;
  state.counters["clear_ms"] = clear;
}

// Times the three phases of one container: fill (n inserts), iterate (sum of `value(element)`),
// clear. `Container` comes from the family F so every allocator runs the same code. With `warm`,
// an untimed fill and clear comes first, so every allocator starts from memory it has just served
// (otherwise one that returns idle memory to the OS, as allockit does after its purge delay,
// is timed on fresh pages, and the kernel's page faults are measured instead of the allocator).
template <class F, class Container, class Fill, class Value>
void InsertIterateClear(benchmark::State& state, Fill fill, Value value, bool warm) {
  const int n = int(state.range(0));
  for (auto _ : state) {
    if (warm) {
      state.PauseTiming();
      auto w = F::template make<Container>();
      for (int i = 0; i < n; ++i) fill(w, i);
      w.clear();
      state.ResumeTiming();
    }
    auto c = F::template make<Container>();
    auto t = Clock::now();
    for (int i = 0; i < n; ++i) fill(c, i);
    const double insert = ms_since(t);
    t = Clock::now();
    long sum = 0;
    for (const auto& e : c) sum += value(e);
    benchmark::DoNotOptimize(sum);
    const double iterate = ms_since(t);
    t = Clock::now();
    c.clear();
    report(state, insert, iterate, ms_since(t));
  }
}

template <class F>
void ListBench(benchmark::State& state) {
  InsertIterateClear<F, typename F::template List<int>>(
      state, [](auto& c, int i) { c.push_back(i); }, [](int x) { return x; }, true);
}

template <class F>
void UMapBench(benchmark::State& state) {
  InsertIterateClear<F, typename F::template UMap<int, std::string>>(
      state, [](auto& c, int i) { c.emplace(i, std::to_string(i)); },
      [](const auto& kv) { return kv.first; }, false);
}

template <class F>
void MapBench(benchmark::State& state) {
  InsertIterateClear<F, typename F::template Map<int, int>>(
      state, [](auto& c, int i) { c.emplace(i, i); }, [](const auto& kv) { return kv.second; },
      true);
}

// 8 jobs on 2 workers; each job fills its own map<int,int> with 1M ints and iterates it.
template <class F>
void ThreadsBench(benchmark::State& state) {
  for (auto _ : state) {
    std::atomic<int> next{0};
    auto job = [](auto& map) {
      for (int i = 0; i < 1000000; ++i) map.emplace(i, i);
      long sum = 0;
      for (const auto& kv : map) sum += kv.second;
      benchmark::DoNotOptimize(sum);
    };
    auto worker = [&] {
      while (next.fetch_add(1) < 8) {
        if constexpr (std::is_same_v<F, PmrUnsyncFamily>) {
          std::pmr::unsynchronized_pool_resource local;  // not thread-safe: one per job
          std::pmr::map<int, int> map(&local);
          job(map);
        } else {
          auto map = F::template make<typename F::template Map<int, int>>();
          job(map);
        }
      }
    };
    auto t = Clock::now();
    std::thread a(worker), b(worker);
    a.join();
    b.join();
    state.SetIterationTime(ms_since(t) / 1000.0);
  }
}

template <class F>
void RegisterFamily(bool umap) {
  const std::string name = F::kName;
  auto unit = benchmark::kMillisecond;
  benchmark::RegisterBenchmark(("list_10M/" + name).c_str(), ListBench<F>)
      ->Arg(10'000'000)
      ->Iterations(1)
      ->Repetitions(3)
      ->UseManualTime()
      ->Unit(unit);
  if (umap)
    benchmark::RegisterBenchmark(("umap_string_10M/" + name).c_str(), UMapBench<F>)
        ->Arg(10'000'000)
        ->Iterations(1)
        ->Repetitions(1)
        ->UseManualTime()
        ->Unit(unit);
  benchmark::RegisterBenchmark(("map_1M/" + name).c_str(), MapBench<F>)
      ->Arg(1'000'000)
      ->Iterations(1)
      ->Repetitions(3)
      ->UseManualTime()
      ->Unit(unit);
  benchmark::RegisterBenchmark(("threads_8x1M_map/" + name).c_str(), ThreadsBench<F>)
      ->Iterations(1)
      ->Repetitions(3)
      ->UseManualTime()
      ->Unit(unit);
}

}  // namespace

void RegisterContainerSuites() {
  RegisterFamily<StdAllocator>(true);
  RegisterFamily<AkPoolAllocator>(true);
  RegisterFamily<AkPoolResource>(true);
  RegisterFamily<PmrUnsyncFamily>(true);
  RegisterFamily<PmrSyncFamily>(true);
  // Boost's fast_pool_allocator serves the bucket array with ordered_malloc(n): left out of umap.
  RegisterFamily<BoostFastPoolAllocator>(false);
}

// Resident bytes per std::list<int> node after n push_backs, for the memory target.
long RssPerListNode(const std::string& family, long n, double* per_node) {
  auto rss = [] {
    long pages = 0, resident = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
      std::fclose(f);
    }
    return resident * 4096;
  };
  auto measure = [&]<class F>(F) {
    auto list = F::template make<typename F::template List<int>>();
    const long before = rss();
    for (long i = 0; i < n; ++i) list.push_back(int(i));
    *per_node = double(rss() - before) / double(n);
    return 0L;
  };
  if (family == StdAllocator::kName) return measure(StdAllocator{});
  if (family == AkPoolAllocator::kName) return measure(AkPoolAllocator{});
  if (family == PmrUnsyncFamily::kName) return measure(PmrUnsyncFamily{});
  if (family == BoostFastPoolAllocator::kName) return measure(BoostFastPoolAllocator{});
  return -1;
}

}  // namespace bench
