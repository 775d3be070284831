// Suite 1 (interleaved) and suite 2 (bulk) from issue 2, for every single-object contender at
// 8, 64 and 280 bytes. Suite 1: one benchmark iteration = five create-then-destroy pairs, run
// 500,000 times. Suite 2: create 50,000 objects, then destroy them front to back, back to front or
// in a fixed random order; only the destroy phase is timed (the create phase is a counter).
#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "pool/contenders.hpp"

namespace bench {
namespace {

template <class C>
void Interleaved(benchmark::State& state) {
  C c;
  for (auto _ : state) {
    for (int pair = 0; pair < 5; ++pair) {
      auto* p = c.create();
      benchmark::DoNotOptimize(p);
      p->bytes[0] = static_cast<unsigned char>(pair);
      benchmark::ClobberMemory();
      c.destroy(p);
    }
  }
}

enum Order { kFront, kBack, kRandom };

template <class C, Order kOrder>
void Bulk(benchmark::State& state) {
  constexpr std::size_t kObjects = 50000;
  C c;
  std::vector<std::size_t> order(kObjects);
  for (std::size_t i = 0; i < kObjects; ++i) order[i] = i;
  if (kOrder == kBack) std::reverse(order.begin(), order.end());
  if (kOrder == kRandom) std::shuffle(order.begin(), order.end(), std::mt19937(42));
  using Ptr = decltype(c.create());
  std::vector<Ptr> objs(kObjects);
  double create_s = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    for (auto& p : objs) {
      p = c.create();
      benchmark::DoNotOptimize(p);
    }
    auto t1 = std::chrono::steady_clock::now();
    for (std::size_t i : order) c.destroy(objs[i]);
    benchmark::ClobberMemory();
    auto t2 = std::chrono::steady_clock::now();
    create_s += std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(std::chrono::duration<double>(t2 - t1).count());
  }
  state.counters["create_s"] = create_s / double(state.iterations());
}

template <template <std::size_t> class C>
void RegisterObjectContender(int bulk_iterations) {
  auto reg = [&]<std::size_t N>() {
    const std::string name = C<N>::kName;
    const std::string size = "/" + std::to_string(N);
    benchmark::RegisterBenchmark(("interleaved/" + name + size).c_str(), Interleaved<C<N>>)
        ->Iterations(500000);
    if (bulk_iterations == 0) return;
    const char* orders[] = {"front", "back", "random"};
    auto fns = {Bulk<C<N>, kFront>, Bulk<C<N>, kBack>, Bulk<C<N>, kRandom>};
    int k = 0;
    for (auto fn : fns)
      benchmark::RegisterBenchmark(("bulk_" + std::string(orders[k++]) + "/" + name + size).c_str(),
                                   fn)
          ->UseManualTime()
          ->Iterations(bulk_iterations)
          ->Repetitions(bulk_iterations < 3 ? 1 : 3)
          ->Unit(benchmark::kMicrosecond);
  };
  reg.template operator()<8>();
  reg.template operator()<64>();
  reg.template operator()<280>();
}

}  // namespace

void RegisterObjectSuites() {
  RegisterObjectContender<NewDelete>(20);
  RegisterObjectContender<BoostObjectPool>(1);  // O(n) per free: seconds per iteration
  RegisterObjectContender<BoostFastPool>(20);
  RegisterObjectContender<LokiSmallObject>(20);
  RegisterObjectContender<PmrUnsync>(20);
  RegisterObjectContender<PmrSync>(20);
  RegisterObjectContender<AkObjectPool>(20);
  RegisterObjectContender<AkSmallObject>(20);
  RegisterObjectContender<Global<BoostObjectPool>::Of>(0);  // suite 1 only
  RegisterObjectContender<Global<AkObjectPool>::Of>(0);
}

}  // namespace bench
