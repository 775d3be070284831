// Public entry points of the shared pools (pool.hpp): argument checks, the fall-through to the
// global operator new for sizes and alignments the pools do not serve, stats and trim.
#include <stdexcept>

#include "allockit/pool.hpp"
#include "core/core.hpp"
#include "pool/pool.hpp"

namespace ak {
namespace {

// Larger than any user address space on Linux: rejected before the fall-through is even tried.
constexpr std::size_t kMaxRequest = std::size_t(1) << 47;

enum class Verdict { kPool, kFallback, kBadSize, kBadAlign, kTooBig };

Verdict classify(std::size_t size, std::size_t align, unsigned* cls) noexcept {
  if (size == 0) return Verdict::kBadSize;
  if (!detail::is_pow2(align)) return Verdict::kBadAlign;
  if (size >= kMaxRequest) return Verdict::kTooBig;
  *cls = detail::class_for(size, align);
  return *cls < detail::kClassCount ? Verdict::kPool : Verdict::kFallback;
}

}  // namespace

void* pool_allocate(std::size_t size, std::size_t align) {
  unsigned cls = 0;
  switch (classify(size, align, &cls)) {
    case Verdict::kPool:
      if (void* p = detail::pool_alloc(cls)) return p;
      throw std::bad_alloc();
    case Verdict::kFallback:
      return ::operator new(size, std::align_val_t(align));
    case Verdict::kBadSize:
      throw std::invalid_argument("ak::pool_allocate: size must be non-zero");
    case Verdict::kBadAlign:
      throw std::invalid_argument("ak::pool_allocate: alignment must be a power of two");
    case Verdict::kTooBig:
      break;
  }
  throw std::bad_alloc();
}

void* try_pool_allocate(std::size_t size, std::size_t align) noexcept {
  unsigned cls = 0;
  switch (classify(size, align, &cls)) {
    case Verdict::kPool:
      return detail::pool_alloc(cls);
    case Verdict::kFallback:
      return ::operator new(size, std::align_val_t(align), std::nothrow);
    default:
      return nullptr;
  }
}

PoolStats pool_stats() noexcept {
  const detail::SlabSourceStats s = detail::slab_source_stats();
  return PoolStats{s.slabs_in_use, s.slabs_cached, s.reserved_bytes, s.resident_bytes,
                   detail::heap_count()};
}

std::size_t pool_trim() noexcept {
  detail::pool_settle_remote();
  return detail::slab_source_trim();
}

void pool_set_purge_delay_ms(std::uint64_t ms) noexcept {
  detail::slab_source_set_purge_delay(ms * 1'000'000);
}

pool_resource* get_pool_resource() noexcept {
  static pool_resource* const resource = ::new pool_resource();  // never destroyed on purpose
  return resource;
}

namespace detail {
void throw_bad_array_length() {
  throw std::bad_array_new_length();
}
}  // namespace detail

}  // namespace ak
