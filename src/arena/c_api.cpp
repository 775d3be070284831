// The arena part of the C ABI (allockit.h): thin wrappers that turn exceptions into NULL.
#include <new>

#include "allockit/allockit.h"
#include "allockit/arena.hpp"

struct ak_arena {
  ak::Arena arena;
};

extern "C" {

ak_arena* ak_arena_create(size_t chunk_bytes) {
  ak::ArenaOptions options;
  options.name = "ak_arena";
  if (chunk_bytes != 0) options.chunk_bytes = chunk_bytes;
  try {
    return new (std::nothrow) ak_arena{ak::Arena(options)};
  } catch (...) {
    return nullptr;
  }
}

void* ak_arena_alloc(ak_arena* arena, size_t size, size_t align) {
  return arena ? arena->arena.try_allocate(size, align) : nullptr;
}

void ak_arena_reset(ak_arena* arena) {
  if (arena) arena->arena.reset();
}

void ak_arena_destroy(ak_arena* arena) {
  delete arena;
}

}  // extern "C"
