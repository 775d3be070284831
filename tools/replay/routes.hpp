// The replay worker's what-if routes (`allockit advise`, plan.hpp): blocks of advised sites
// served by pools and arenas of liballockit-prefixed, resolved with dlsym (never linked), one
// instance per route and replay thread; and the check mode's bookkeeping, which proves a routed
// plan makes every allocation and free and never resets an arena over a live block. Header-only
// and heap-free, for allockit-replay alone; instances are made and destroyed outside the timed
// calls.
#pragma once
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "replay/plan.hpp"

namespace ak::replay {

// One replay thread's route instances and, when checking, its live blocks per route.
struct ThreadRoutes {
  void* inst[kMaxRoutes + 1];
  int64_t live[kMaxRoutes + 1];
};

struct Routes {
  // The pool and arena C ABI (allockit.h).
  void* (*pool_create)(size_t, size_t) = nullptr;
  void* (*pool_alloc)(void*) = nullptr;
  void (*pool_free)(void*, void*) = nullptr;
  void (*pool_destroy)(void*) = nullptr;
  void* (*arena_create)(size_t) = nullptr;
  void* (*arena_alloc)(void*, size_t, size_t) = nullptr;
  void (*arena_reset)(void*) = nullptr;
  void (*arena_destroy)(void*) = nullptr;
  const PlanRoute* table = nullptr;  // route id r is table[r - 1]
  uint32_t count = 0;
  bool check = false;
  std::atomic<uint64_t> allocs{0}, frees{0};

  // Resolves the C ABI from the library at `path`; an error message, or null.
  const char* load(const char* path) {
    void* h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
    if (!h) return "the plan has routes: ALLOCKIT_REPLAY_ROUTES must name liballockit-prefixed.so";
    bool ok = true;
    auto sym = [&](auto& f, const char* name) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(h, name));
      ok = ok && f;
    };
    sym(pool_create, "ak_pool_create");
    sym(pool_alloc, "ak_pool_alloc");
    sym(pool_free, "ak_pool_free");
    sym(pool_destroy, "ak_pool_destroy");
    sym(arena_create, "ak_arena_create");
    sym(arena_alloc, "ak_arena_alloc");
    sym(arena_reset, "ak_arena_reset");
    sym(arena_destroy, "ak_arena_destroy");
    return ok ? nullptr : "the routes' library lacks the pool and arena C API";
  }

  // This thread's instance of `route`, made on first use; null when it cannot be made.
  void* instance(ThreadRoutes& t, uint16_t route) {
    void*& inst = t.inst[route];
    if (!inst) {
      const PlanRoute& r = table[route - 1];
      inst = r.kind == kRoutePool ? pool_create(r.block_size, r.align) : arena_create(0);
    }
    return inst;
  }

  // A routed call (the timed part): the block from or back to the route's instance; a free
  // flagged kResetAfter resets its arena.
  void* call(const PlanOp& op, void* old, void* inst) const {
    const PlanRoute& r = table[op.route - 1];
    const bool pool = r.kind == kRoutePool;
    if (op.slot == kNone) {
      if (pool) pool_free(inst, old);
      if (op.flags & kResetAfter) arena_reset(inst);
      return nullptr;
    }
    const uint64_t bytes = op_bytes(op);
    void* p = pool ? pool_alloc(inst) : arena_alloc(inst, bytes ? bytes : 1, r.align);
    if (p && static_cast<trace::Op>(op.kind) == trace::Op::kCalloc) std::memset(p, 0, bytes);
    return p;
  }

  // Check mode, after op returned `p`: counts the allocations and frees made. False when the op
  // reset an arena that still held a live block of this thread's route.
  bool check_op(ThreadRoutes& t, const PlanOp& op, void* p) {
    if (op.old_slot != kNone) {
      frees.fetch_add(1, std::memory_order_relaxed);
      if (op.flags & kRouted) --t.live[op.route];
    }
    if ((op.flags & kResetAfter) && t.live[op.route] != 0) return false;
    if (op.slot != kNone && p) {
      allocs.fetch_add(1, std::memory_order_relaxed);
      if (op.flags & kRouted) ++t.live[op.route];
    }
    return true;
  }

  // Destroys this thread's instances (the pools' and arenas' memory goes back).
  void destroy(ThreadRoutes& t) const {
    for (uint32_t r = 1; r <= count; ++r) {
      void*& inst = t.inst[r];
      if (!inst) continue;
      table[r - 1].kind == kRoutePool ? pool_destroy(inst) : arena_destroy(inst);
      inst = nullptr;
    }
  }
};

}  // namespace ak::replay
