// The starter slab: a process's first small blocks of every class, packed into one slab.
//
// Each class used gets a 64 KiB slab of its own, whose first page the first block touches: a
// short process that uses 20 classes took 20 page faults (about 3 us each here) for a few KiB of
// blocks, most of what it paid for allockit over glibc's compact heap. So the first blocks of each
// small class of up to kStarterClassBytes, up to kStarterClassBlocks blocks of it and no more
// than that many bytes (starter_share), are bumped out of one shared slab instead, in class order
// of first use, each block on cache lines of its own, touching one page per 4 KiB handed out.
// (8 KiB, not 4: a shell's fork child takes one 8 KiB buffer, which cost a slab, and two page
// faults, per child. 16 blocks, not 8 KiB of any class: every allocation and free of a starter
// block is a slow call, and a 24-byte class had 128 blocks there; ngram-shake1's replay made 390
// such allocations and 481 such frees, 0.9% of its calls: its p99.) A class that needs more gets
// its own slab, as before. The starter slab is a 64 KiB slab like any other, so its blocks are
// found, freed and measured through its header; it hands out kStarterBlockBytes of blocks, from its
// base (its header sits apart, in its region's table).
//
// A block freed by a thread with a heap joins that thread's bin of its class, so a class that
// churns a little keeps reusing the same few starter blocks on the same dense pages (a shell's
// fork loop: each block of its own slab was one more copy-on-write page per fork). Every such
// free takes the slow path, so after kStarterBinFrees of them the class closes and its blocks are
// dropped as they come back: a hot class moves to a slab of its own (glibc's bench-malloc-simple
// ran 3.9x slower with starter blocks cycling through bins for good). After 32: a slow free
// costs 40-80 instructions more, and every one counts in a short program's tail. At 2,048 a
// class's starter blocks cycled long enough to be 38% of scp's replayed frees (13,600 of 35,700
// left the fast path), its p99 call 90-100 ns against 60-70 at 256. At 256, cbit-parity's and
// ngram-shake1's replays each sent 1,110 of about 47,500 frees through here, more than 2%, which
// set their free p99 at 107 and 166 ns; at 32, 494 and 481 (most of them drops, each block
// once), free p99 80 and 129 ns, and server's 124 -> 80 (the five-run compares of both
// builds side by side; tcmalloc's 46-58 ns). The 2,000-process shell script (bench/start) ran
// alike at 256 and 2,048 (11 paired rounds) and at 32 and 256 (5 rounds: 1.79 and 1.82 s).
//
// A dropped block is marked freed in the map and never handed out again; the waste is bounded by
// the slab (48 KiB per process). A class with kStarterClassFrees blocks dropped closes too. A
// block in a bin has the checks of any block there (liballockit's freed tag); a dropped one has
// the map's. Lock-free: a bump pointer advanced with a CAS, per-class counts, and one byte of
// block map per 64-byte line of blocks, all on the hot page (pool/hot_page.hpp) with the first
// heap. Off in checked (debug) builds, whose slabs keep a state bit per block.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "allockit/detail/shared_pool.hpp"

namespace ak::detail {

inline constexpr std::size_t kStarterClassBytes = 8192;
inline constexpr std::size_t kStarterClassBlocks = 16;
inline constexpr std::uint32_t kStarterClassFrees = 8;
inline constexpr std::uint32_t kStarterBinFrees = 32;
inline constexpr std::size_t kStarterLine = 64;  // block alignment, size and map granularity
// The blocks the starter slab hands out, from its base: as many as its map can cover beside the
// first heap on the hot page.
inline constexpr std::size_t kStarterBlockBytes = std::size_t(48) << 10;

// The starter slab's state, all zero until the first block is handed out. Counters are narrow to
// fit the hot page: each stays below its type's range (class_frees may wrap once its class has
// closed, which only closes it again).
struct StarterState {
  std::atomic<int> state{0};  // 0: not yet made, 1: being made, 2: ready, 3: unavailable
  std::atomic<char*> next{nullptr};
  char* data = nullptr;  // its first block; its blocks end kStarterBlockBytes later
  std::atomic<std::uint16_t> class_bytes[kClassCount] = {};   // handed out; kClosed once closed
  std::atomic<std::uint16_t> class_binned[kClassCount] = {};  // frees into a bin
  std::atomic<std::uint8_t> class_frees[kClassCount] = {};    // blocks dropped
  // One byte per line of blocks: class + 1 where a block starts, | kFreedBit once dropped.
  std::atomic<std::uint8_t> map[kStarterBlockBytes / kStarterLine] = {};
};
static_assert(kStarterClassBytes < 0xffff && kStarterBinFrees < 0xffff);

// The bytes of lines a class whose blocks take `line_bytes` each may have from the starter slab.
constexpr std::size_t starter_share(std::size_t line_bytes) noexcept {
  return std::min(line_bytes * kStarterClassBlocks, kStarterClassBytes);
}

// Returns: a block of small class `cls` from the starter slab, 64-byte aligned (at least what its
// own slab would give), or null when the class has had its share, the slab is used up or cannot
// be had.
void* starter_alloc(unsigned cls) noexcept;

// Returns: the class of block `p` of the starter slab `s`, being freed. Aborts with a message when
// `p` is not a block of it or was dropped already.
unsigned starter_block_class(const Slab* s, const void* p) noexcept;

// Returns: whether a freed block of class `cls` may join a bin: not once the class has had
// kStarterBinFrees frees into bins (it is churning: it closes, and its blocks are dropped as they
// come back, so it moves to a slab of its own, whose frees take the fast path).
bool starter_may_bin(unsigned cls) noexcept;

// Effects: drops block `p` of class `cls` of the starter slab (checked by starter_block_class):
// marked freed, never handed out again.
void starter_drop(void* p, unsigned cls) noexcept;

// Returns: 1 once the starter slab exists, else 0 (stats).
std::size_t starter_slab_count() noexcept;

}  // namespace ak::detail
