// The secure build's canaries, freed-block fill, quarantine and zero-size region (secure.hpp).
#include "malloc/secure.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>

#include "core/core.hpp"
#include "os/os.hpp"
#include "pool/pool.hpp"

namespace ak::detail {

namespace {

// ---- quarantine ---------------------------------------------------------------------------

constexpr unsigned kSlotBits = 6;
constexpr unsigned kQuarantineSlots = 1u << kSlotBits;
constexpr std::size_t kQuarantineBytes = std::size_t(1) << 20;

struct Quarantine {
  void* block[kQuarantineSlots];
  std::uint32_t bytes[kQuarantineSlots];
  unsigned count;
  bool armed;  // the thread-exit hook is set
  std::size_t total;
  std::uint64_t rng;
};
thread_local constinit Quarantine tl_quarantine [[gnu::tls_model("initial-exec")]] = {};

[[noreturn, gnu::noinline, gnu::cold]] void report_write_after_free(const char* call,
                                                                    const void* p) {
  bad_pointer(call, "write after free detected (a freed block's fill was overwritten)", p);
}

// Inline, the report out of line: the full quarantine's path then calls nothing but the block's
// release, as a tail call, and saves no register (18 instructions a free fewer).
[[gnu::always_inline]] inline void check_freed(const char* call, const void* p, std::size_t bytes) {
  if (!holds_freed_fill(p, bytes, pool_free_tag(p))) [[unlikely]]
    report_write_after_free(call, p);
}

// Gives a block that left the quarantine, checked and still tagged, back to its slab.
void release(void* p) {
  pool_free_in(slab_of_any(p), p);
}

// Removes slot `i`, returning its block after checking its fill.
void* take_slot(Quarantine& q, unsigned i) {
  void* p = q.block[i];
  check_freed("free()", p, q.bytes[i]);
  q.total -= q.bytes[i];
  --q.count;
  q.block[i] = q.block[q.count];
  q.bytes[i] = q.bytes[q.count];
  return p;
}

void empty(Quarantine& q) {
  while (q.count > 0) release(take_slot(q, q.count - 1));
}
void empty_at_thread_exit(void* quarantine) {
  const PoolCall name("thread exit");
  empty(*static_cast<Quarantine*>(quarantine));
}
constinit os::ThreadExitHook g_quarantine_exit(&empty_at_thread_exit);

// ---- zero-size region -----------------------------------------------------------------------

constexpr std::size_t kZeroRegionBytes = std::size_t(64) << 20;
constexpr std::size_t kZeroSlot = 16;
constexpr std::size_t kZeroSlots = kZeroRegionBytes / kZeroSlot;  // 4M

constinit os::Lock g_zero_lock;
std::atomic<char*> g_zero_base{nullptr};
std::atomic<std::uint64_t>* g_zero_live = nullptr;  // one bit per slot, set while handed out
std::atomic<std::size_t> g_zero_next{0};            // slots below it were handed out at least once
std::size_t g_zero_cursor = 0;  // once all were: where the search for a free one resumes
bool g_zero_failed = false;

char* zero_region() {
  char* base = g_zero_base.load(std::memory_order_acquire);
  if (base != nullptr) [[likely]]
    return base;
  os::LockGuard guard(g_zero_lock);
  base = g_zero_base.load(std::memory_order_relaxed);
  if (base != nullptr || g_zero_failed) return base;
  // Address space only: a reservation is never committed, so it costs no memory. The live bits
  // (512 KiB of address space) are touched a page per 32K blocks.
  auto* bits = static_cast<std::atomic<std::uint64_t>*>(os::map(kZeroSlots / 8, 4096));
  base = bits ? static_cast<char*>(os::reserve(kZeroRegionBytes, 4096)) : nullptr;
  if (base == nullptr) {
    if (bits) os::release(bits, kZeroSlots / 8);
    g_zero_failed = true;
    return nullptr;
  }
  g_zero_live = bits;
  g_zero_base.store(base, std::memory_order_release);
  return base;
}

}  // namespace

void arm_block(void* p, std::size_t bytes, std::size_t request) noexcept {
  auto* c = static_cast<unsigned char*>(p);
  const std::size_t slack = bytes - kTrailerBytes - request;
  fill_with(c + request, slack < 16 ? slack : 16, kSlackByte);
  put_trailer(p, bytes, request);
}

void report_overflow(const char* call, const void* p, bool trailer) noexcept {
  bad_pointer(call,
              trailer ? "heap overflow detected (the canary after the block was overwritten)"
                      : "heap overflow detected (a write past the requested size)",
              p);
}

namespace {
// quarantine_put's other cases: a quarantine not full yet, or over its byte bound (big blocks came
// in). Over the bound, slot 0's block leaves (slot 1's while slot 0 holds the new one), until the
// bound holds or only the new block is left.
[[gnu::noinline]] void quarantine_put_slow(Quarantine& q, void* p, std::size_t bytes) {
  if (q.count < kQuarantineSlots) {
    if (!q.armed) {
      q.armed = true;
      q.rng = os::process_secret() ^ addr(&q);
      g_quarantine_exit.arm(&q);
    }
    q.block[q.count] = p;
    q.bytes[q.count] = std::uint32_t(bytes);
    ++q.count;
    q.total += bytes;
  }
  while (q.total > kQuarantineBytes && q.count > 1) release(take_slot(q, q.block[0] == p ? 1 : 0));
}
}  // namespace

void quarantine_put(void* p, std::size_t bytes) noexcept {
  Quarantine& q = tl_quarantine;
  if (q.count < kQuarantineSlots) [[unlikely]]
    return quarantine_put_slow(q, p, bytes);
  // Full: the new block takes a slot drawn at random, whose block leaves. A 64-bit LCG (Knuth's
  // MMIX constants), its top bits: one multiply, where a xorshift took six dependent steps.
  q.rng = q.rng * 6364136223846793005ull + 1442695040888963407ull;
  const unsigned i = unsigned(q.rng >> (64 - kSlotBits));
  void* out = q.block[i];
  const std::uint32_t out_bytes = q.bytes[i];
  check_freed("free()", out, out_bytes);
  q.total += bytes - out_bytes;
  q.block[i] = p;
  q.bytes[i] = std::uint32_t(bytes);
  if (q.total > kQuarantineBytes) [[unlikely]] {
    release(out);
    return quarantine_put_slow(q, p, bytes);
  }
  release(out);
}

bool quarantine_drain() noexcept {
  const bool any = tl_quarantine.count > 0;
  empty(tl_quarantine);
  return any;
}

void quarantine_check() noexcept {
  const Quarantine& q = tl_quarantine;
  for (unsigned i = 0; i < q.count; ++i) check_freed("exit", q.block[i], q.bytes[i]);
}

void* zero_alloc() noexcept {
  char* base = zero_region();
  if (base == nullptr) return nullptr;
  std::size_t i = g_zero_next.load(std::memory_order_relaxed);
  if (i < kZeroSlots) i = g_zero_next.fetch_add(1, std::memory_order_relaxed);
  if (i < kZeroSlots) {
    g_zero_live[i / 64].fetch_or(std::uint64_t(1) << (i % 64), std::memory_order_relaxed);
    return base + i * kZeroSlot;
  }
  // Every slot was handed out once: reuse a freed one, searching on from the last found.
  os::LockGuard guard(g_zero_lock);
  for (std::size_t n = 0; n < kZeroSlots / 64; ++n) {
    const std::size_t w = (g_zero_cursor + n) % (kZeroSlots / 64);
    std::uint64_t bits = g_zero_live[w].load(std::memory_order_relaxed);
    while (bits != ~std::uint64_t(0)) {
      const std::uint64_t bit = ~bits & (bits + 1);  // lowest clear bit
      bits = g_zero_live[w].fetch_or(bit, std::memory_order_relaxed);
      if ((bits & bit) == 0) {
        g_zero_cursor = w;
        return base + (w * 64 + std::size_t(std::countr_zero(bit))) * kZeroSlot;
      }
    }
  }
  return nullptr;  // 4M zero-size blocks live
}

bool in_zero_region(const void* p) noexcept {
  const char* base = g_zero_base.load(std::memory_order_acquire);
  return base != nullptr && static_cast<const char*>(p) >= base &&
         static_cast<const char*>(p) < base + kZeroRegionBytes;
}

namespace {
// The slot of zero-size block `p` (in the region), reporting one never handed out.
std::size_t zero_slot(const char* call, const void* p) {
  const std::size_t off = std::size_t(static_cast<const char*>(p) - g_zero_base.load());
  const std::size_t i = off / kZeroSlot;
  if (off % kZeroSlot != 0 || i >= g_zero_next.load(std::memory_order_relaxed))
    bad_pointer(call, "invalid pointer (not a zero-size block)", p);
  return i;
}
}  // namespace

void zero_check_live(const char* call, const void* p) noexcept {
  const std::size_t i = zero_slot(call, p);
  if ((g_zero_live[i / 64].load(std::memory_order_relaxed) & (std::uint64_t(1) << (i % 64))) == 0)
    bad_pointer(call, "invalid pointer (a freed zero-size block)", p);
}

void zero_free(const char* call, void* p) noexcept {
  const std::size_t i = zero_slot(call, p);
  const std::uint64_t bit = std::uint64_t(1) << (i % 64);
  if ((g_zero_live[i / 64].fetch_and(~bit, std::memory_order_relaxed) & bit) == 0)
    bad_pointer(call, "double free detected (a zero-size block)", p);
}

}  // namespace ak::detail
