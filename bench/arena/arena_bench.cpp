// Arena benchmarks from issue 3, side by side: the two lac shapes (small: lac's example, a root
// with an int and a slice of 3 items whose five int/bool/string fields are each allocated, about
// 23 allocations; large: a graph of 1,600 small nodes), built and freed each iteration by
// new/delete, std::pmr::monotonic_buffer_resource (re-created or reused with release()) and
// ak::Arena (reset). Each runs with 1 and 2 threads (one allocator per thread). Counters:
// chunk_maps_per_iter and chunk_unmaps_per_iter count ak's mmap/munmap calls per iteration after
// warm-up. alloc16 measures one allocate(16, 8).
#include <benchmark/benchmark.h>

#include <memory_resource>
#include <string_view>
#include <type_traits>
#include <vector>

#include "allockit/arena.hpp"

namespace {

constexpr int kGraphNodes = 1600;

// ---- the small shape, after lac's example: every field is its own small allocation ----
struct PbItem {
  int* id;
  int* price;
  int* cls;
  std::string_view* name;  // Go's *string: a header pointing at static text
  bool* active;
};
template <class Vec>
struct PbData {
  int* age;
  Vec items;  // the slice of *PbItem
  PbItem* in_use;
};

using StdData = PbData<std::vector<PbItem*>>;
using PmrData = PbData<std::pmr::vector<PbItem*>>;
using AkData = PbData<ak::arena_vector<PbItem*>>;
static_assert(std::is_trivially_destructible_v<AkData>);

// Fills `d` with lac's three items; `make<T>(args)` is the allocator under test.
template <class Data, class Make>
void fill_small(Data* d, Make&& make) {
  d->age = make.template operator()<int>(11);
  for (int i = 0; i < 3; ++i) {
    auto* item = make.template operator()<PbItem>();
    item->id = make.template operator()<int>(i + 1);
    item->active = make.template operator()<bool>(true);
    item->price = make.template operator()<int>(100 + i);
    item->cls = make.template operator()<int>(3 + i);
    item->name = make.template operator()<std::string_view>("name");
    d->items.push_back(item);
  }
  d->in_use = d->items[0];
  benchmark::DoNotOptimize(d);
}

// ---- the large shape: 1,600 small nodes, each linked to the two built before it ----
struct Node {
  int id;
  int weight;
  Node* edges[2];
  bool visited;
};

// Builds the graph with `alloc()` supplying raw node storage; the work besides allocation is a
// handful of register stores, so the allocator dominates. Returns the last node.
template <class Alloc>
Node* build_graph(Alloc&& alloc, Node** all) {
  Node *prev = nullptr, *prev2 = nullptr;
  for (int i = 0; i < kGraphNodes; ++i) {
    Node* n = alloc();
    *n = Node{i, i * 3, {prev, prev2}, false};
    all[i] = n;
    prev2 = prev;
    prev = n;
  }
  benchmark::DoNotOptimize(prev);
  return prev;
}

void BM_small_new_delete(benchmark::State& state) {
  for (auto _ : state) {
    auto* d = new StdData{};
    fill_small(d, []<class T>(auto&&... args) { return new T{args...}; });
    delete d->age;
    for (auto* item : d->items) {
      delete item->id;
      delete item->active;
      delete item->price;
      delete item->cls;
      delete item->name;
      delete item;
    }
    delete d;
  }
}

void build_pmr_small(std::pmr::memory_resource* r) {
  auto* d = ::new (r->allocate(sizeof(PmrData), alignof(PmrData)))
      PmrData{nullptr, std::pmr::vector<PbItem*>(r), nullptr};
  fill_small(d, [r]<class T>(auto&&... args) {
    return ::new (r->allocate(sizeof(T), alignof(T))) T{args...};
  });
  // Monotonic memory is released wholesale, as lac's reset is.
}

void BM_small_pmr_monotonic_recreated(benchmark::State& state) {
  for (auto _ : state) {
    std::pmr::monotonic_buffer_resource r;
    build_pmr_small(&r);
  }
}

void BM_small_pmr_monotonic_reused(benchmark::State& state) {
  std::pmr::monotonic_buffer_resource r;
  for (auto _ : state) {
    build_pmr_small(&r);
    r.release();
  }
}

void count_chunk_calls(benchmark::State& state, ak::ChunkPoolStats before) {
  const ak::ChunkPoolStats after = ak::default_chunk_pool().stats();
  state.counters["chunk_maps_per_iter"] =
      double(after.map_calls - before.map_calls) / double(state.iterations());
  state.counters["chunk_unmaps_per_iter"] =
      double(after.unmap_calls - before.unmap_calls) / double(state.iterations());
}

void BM_small_ak_arena(benchmark::State& state) {
  ak::Arena arena;
  auto build = [&] {
    auto* d = arena.make<AkData>(AkData{nullptr, ak::arena_vector<PbItem*>(arena), nullptr});
    fill_small(d, [&]<class T>(auto&&... args) { return arena.make<T>(T{args...}); });
    arena.reset();
  };
  build();  // warm-up: the first chunk is mapped here
  const ak::ChunkPoolStats before = ak::default_chunk_pool().stats();
  for (auto _ : state) build();
  count_chunk_calls(state, before);
  state.counters["destructors"] = double(arena.stats().destructors);
}

void BM_large_new_delete(benchmark::State& state) {
  std::vector<Node*> all(kGraphNodes);
  for (auto _ : state) {
    build_graph([] { return new Node; }, all.data());
    for (Node* n : all) delete n;
  }
}

void build_pmr_large(std::pmr::memory_resource* r, Node** all) {
  build_graph([r] { return static_cast<Node*>(r->allocate(sizeof(Node), alignof(Node))); }, all);
}

void BM_large_pmr_monotonic_recreated(benchmark::State& state) {
  std::vector<Node*> all(kGraphNodes);
  for (auto _ : state) {
    std::pmr::monotonic_buffer_resource r;
    build_pmr_large(&r, all.data());
  }
}

void BM_large_pmr_monotonic_reused(benchmark::State& state) {
  std::vector<Node*> all(kGraphNodes);
  std::pmr::monotonic_buffer_resource r;
  for (auto _ : state) {
    build_pmr_large(&r, all.data());
    r.release();
  }
}

void BM_large_ak_arena(benchmark::State& state) {
  std::vector<Node*> all(kGraphNodes);
  ak::Arena arena;
  auto build = [&] {
    // Raw storage, as the other contenders get: build_graph() writes every field.
    build_graph([&] { return static_cast<Node*>(arena.allocate(sizeof(Node), alignof(Node))); },
                all.data());
    arena.reset();
  };
  build();
  const ak::ChunkPoolStats before = ak::default_chunk_pool().stats();
  for (auto _ : state) build();
  count_chunk_calls(state, before);
  state.counters["destructors"] = double(arena.stats().destructors);
}

// One allocate(16, 8): 1,024 per reset so the reset is amortised away.
void BM_alloc16_ak_arena(benchmark::State& state) {
  ak::Arena arena;
  for (auto _ : state) {
    for (int i = 0; i < 1024; ++i) benchmark::DoNotOptimize(arena.allocate(16, 8));
    arena.reset();
  }
  state.SetItemsProcessed(state.iterations() * 1024);
  state.counters["ns_per_alloc"] = benchmark::Counter(
      double(state.iterations()) * 1024, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_alloc16_pmr_monotonic_reused(benchmark::State& state) {
  std::pmr::monotonic_buffer_resource r;
  for (auto _ : state) {
    for (int i = 0; i < 1024; ++i) benchmark::DoNotOptimize(r.allocate(16, 8));
    r.release();
  }
  state.counters["ns_per_alloc"] = benchmark::Counter(
      double(state.iterations()) * 1024, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

#define AK_SHAPE(shape, who)                                                       \
  BENCHMARK(BM_##shape##_##who)->Name(#shape "/" #who)->Threads(1)->UseRealTime(); \
  BENCHMARK(BM_##shape##_##who)->Name(#shape "/" #who)->Threads(2)->UseRealTime();

AK_SHAPE(small, new_delete)
AK_SHAPE(small, pmr_monotonic_recreated)
AK_SHAPE(small, pmr_monotonic_reused)
AK_SHAPE(small, ak_arena)
AK_SHAPE(large, new_delete)
AK_SHAPE(large, pmr_monotonic_recreated)
AK_SHAPE(large, pmr_monotonic_reused)
AK_SHAPE(large, ak_arena)
BENCHMARK(BM_alloc16_ak_arena)->Name("alloc16/ak_arena");
BENCHMARK(BM_alloc16_pmr_monotonic_reused)->Name("alloc16/pmr_monotonic_reused");

}  // namespace

BENCHMARK_MAIN();
