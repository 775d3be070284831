// Every contender of the pool benchmarks behind one shape: Make<N>::create() / destroy(p) for
// single objects of N bytes, and Alloc<T> families for containers. Names are the row labels of
// bench/results/pools.md; rows named new_delete / std_allocator are re-run under LD_PRELOAD for
// jemalloc, mimalloc and tcmalloc by bench/run_pool_bench.py.
#pragma once

#include <benchmark/benchmark.h>
#include <loki/SmallObj.h>

#include <boost/pool/object_pool.hpp>
#include <boost/pool/pool_alloc.hpp>
#include <memory_resource>
#include <string>

#include "allockit/object_pool.hpp"
#include "allockit/pool.hpp"

namespace bench {

template <std::size_t N>
struct Obj {
  unsigned char bytes[N];
  Obj() { bytes[0] = 1; }
};

template <std::size_t N>
struct LokiObj : Loki::SmallObject<> {
  unsigned char bytes[N];
  LokiObj() { bytes[0] = 1; }
};

template <std::size_t N>
struct AkObj : ak::SmallObject<AkObj<N>> {
  unsigned char bytes[N];
  AkObj() { bytes[0] = 1; }
};

// Contenders for single objects: each owns its state and creates/destroys one object.
template <std::size_t N>
struct NewDelete {
  static constexpr const char* kName = "new_delete";
  Obj<N>* create() { return new Obj<N>; }
  void destroy(Obj<N>* p) { delete p; }
};

template <std::size_t N>
struct BoostObjectPool {
  static constexpr const char* kName = "boost_object_pool";
  boost::object_pool<Obj<N>> pool;
  Obj<N>* create() { return pool.construct(); }
  void destroy(Obj<N>* p) { pool.destroy(p); }
};

template <std::size_t N>
struct BoostFastPool {
  static constexpr const char* kName = "boost_fast_pool_allocator";
  boost::fast_pool_allocator<Obj<N>> alloc;
  Obj<N>* create() { return ::new (alloc.allocate(1)) Obj<N>; }
  void destroy(Obj<N>* p) {
    p->~Obj<N>();
    alloc.deallocate(p, 1);
  }
};

template <std::size_t N>
struct LokiSmallObject {
  static constexpr const char* kName = "loki_small_object";
  LokiObj<N>* create() { return new LokiObj<N>; }
  void destroy(LokiObj<N>* p) { delete p; }
};

template <std::size_t N, class Resource>
struct PmrPool {
  Resource resource;
  Obj<N>* create() { return ::new (resource.allocate(sizeof(Obj<N>), alignof(Obj<N>))) Obj<N>; }
  void destroy(Obj<N>* p) {
    p->~Obj<N>();
    resource.deallocate(p, sizeof(Obj<N>), alignof(Obj<N>));
  }
};
template <std::size_t N>
struct PmrUnsync : PmrPool<N, std::pmr::unsynchronized_pool_resource> {
  static constexpr const char* kName = "pmr_unsynchronized_pool";
};
template <std::size_t N>
struct PmrSync : PmrPool<N, std::pmr::synchronized_pool_resource> {
  static constexpr const char* kName = "pmr_synchronized_pool";
};

template <std::size_t N>
struct AkObjectPool {
  static constexpr const char* kName = "ak_object_pool";
  ak::ObjectPool<Obj<N>> pool;
  Obj<N>* create() { return pool.create(); }
  void destroy(Obj<N>* p) { pool.destroy(p); }
};

// Contender C<N> in static storage, reached through a global as a program-wide pool per type
// is, rather than as a local of the benchmark: shows whether the pool's placement matters next
// to the shared pools, whose state is per thread and never on the caller's stack.
template <template <std::size_t> class C>
struct Global {
  template <std::size_t N>
  struct Of {
    static inline const std::string kName = std::string(C<N>::kName) + "_global";
    static inline C<N> inner;
    auto* create() { return inner.create(); }
    void destroy(decltype(inner.create()) p) { inner.destroy(p); }
  };
};

template <std::size_t N>
struct AkSmallObject {
  static constexpr const char* kName = "ak_small_object";
  AkObj<N>* create() { return new AkObj<N>; }
  void destroy(AkObj<N>* p) { delete p; }
};

}  // namespace bench
