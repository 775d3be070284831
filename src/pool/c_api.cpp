// The block-pool part of the C ABI (allockit.h): thin wrappers over ak::BlockPool that turn
// exceptions into NULL.
#include <new>

#include "allockit/allockit.h"
#include "allockit/block_pool.hpp"

struct ak_pool {
  ak::BlockPool pool;
};

extern "C" {

ak_pool* ak_pool_create(size_t block_size, size_t align) {
  ak::BlockPoolOptions options;
  options.name = "ak_pool";
  try {
    return new (std::nothrow)
        ak_pool{ak::BlockPool(block_size, align ? align : alignof(std::max_align_t), options)};
  } catch (...) {
    return nullptr;
  }
}

void* ak_pool_alloc(ak_pool* pool) {
  return pool ? pool->pool.try_allocate() : nullptr;
}

void ak_pool_free(ak_pool* pool, void* p) {
  if (pool && p) pool->pool.deallocate(p);
}

void ak_pool_destroy(ak_pool* pool) {
  delete pool;
}

}  // extern "C"
