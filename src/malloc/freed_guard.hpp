// Freed big blocks made inaccessible ("sealed"), so a read or write through a stale pointer
// faults, as it does under glibc, which unmaps its big blocks at free. Medium blocks of 128 KiB or
// more are sealed past their first page (their free-list link and freed-block tag live there),
// emptied first (malloc.cpp, free_medium); large blocks are sealed whole in the large-block cache
// (large_cache.hpp), emptied first from 1 MiB (large.cpp). A sealed block is
// unsealed when it is handed out again, never at the next request of the thread that freed it, so
// a write just after a free-and-reuse faults too.
//
// Sealing costs an mprotect pair, about 14 us for a resident 256 KiB block here, more than writing
// the block. So by default (ALLOCKIT_GUARD_FREED=1, adaptive) the size from which blocks are
// sealed starts at 128 KiB and rises an eighth past each sealed size (kSealStep), up to 32 MiB,
// from which every block is sealed: glibc's dynamic mmap threshold, in steps, so a program that
// frees big blocks over and over pays a few times, not at every free, and one whose largest
// block creeps up (a buffer a few KiB larger each round) pays once per eighth, not every round.
// ALLOCKIT_GUARD_FREED=2 seals every block of 128 KiB or more; 0 none.
#pragma once

#include <atomic>
#include <cstddef>

namespace ak::detail {

inline constexpr std::size_t kSealAlwaysBytes = std::size_t(32) << 20;
// A sealed size raises the adaptive bar by 1/kSealStep of itself: sizes within an eighth of one
// sealed count as it. Past each sealed byte instead (glibc's threshold), rounds of 13 buffers of
// 256 KiB-4 MiB, each round's 2 KiB larger, sealed the largest in every round: its pages moved
// out and faulted in again, the cache left holding pieces no request fit, 0.94-1.0 s and
// 46-55 MiB peak RSS for 1,000 rounds against 0.07-0.21 s and 16-24 MiB (bench/workloads
// creeping_largest; mimalloc 0.06 s and 19 MiB, glibc 5.3-5.5 s and 19).
inline constexpr std::size_t kSealStep = 8;

// The size from which should_seal may say yes now: the adaptive bar, kSealableMediumBytes where
// every such block is sealed, SIZE_MAX once should_seal has seen sealing off. Below it, no
// block below kSealAlwaysBytes is sealed.
extern std::atomic<std::size_t> g_seal_from;
// Whether a freed block of `bytes` (below kSealAlwaysBytes) needs should_seal's answer: false
// means it is not sealed. One load and compare, for the fast frees of sealable medium blocks.
inline bool may_seal(std::size_t bytes) noexcept {
  return bytes >= g_seal_from.load(std::memory_order_relaxed);
}

// Whether a freed block of `bytes` is to be sealed now; in the adaptive mode, a yes raises the bar
// past `bytes`. Thread-safe (a relaxed atomic; racing frees may both say yes).
bool should_seal(std::size_t bytes) noexcept;

}  // namespace ak::detail
