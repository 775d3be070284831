// The starter slab: a process's first small blocks of every class, packed into one slab.
//
// Each class used gets a 64 KiB slab of its own, whose first page the first block touches: a
// short process that uses 20 classes took 20 page faults (about 3 us each here) for a few KiB of
// blocks, most of what it paid for allockit over glibc's compact heap. So the first blocks of each
// small class, up to kStarterClassBytes of it, are bumped out of one shared slab instead, in
// class order of first use, each block on cache lines of its own, touching one page per 4 KiB
// handed out. A class that needs more gets its own slab, as before. The starter slab is a 64 KiB
// slab like any other, so its blocks are found, freed and measured through its header.
//
// Its blocks are never reused: a free marks the block freed (a second free is reported) and
// nothing more. The waste is bounded by the slab (64 KiB per process). A class whose blocks are
// freed kStarterClassFrees times is churning: it moves to a slab of its own at once, where blocks
// are reused (a shell allocating and freeing one block per fork otherwise wrote a new starter
// block, and a copy-on-write page, on every fork). Lock-free: a bump pointer advanced with a CAS,
// a per-class byte count, and one byte of block map per 16 bytes of slab. Off in checked (debug)
// builds, whose slabs keep a state bit per block.
#pragma once

#include <cstddef>
#include <cstdint>

#include "allockit/detail/shared_pool.hpp"

namespace ak::detail {

inline constexpr std::size_t kStarterClassBytes = 4096;
inline constexpr std::uint32_t kStarterClassFrees = 8;

// Returns: a block of small class `cls` from the starter slab, 64-byte aligned (at least what its
// own slab would give), or null when the class has had its share, the slab is used up or cannot
// be had.
void* starter_alloc(unsigned cls) noexcept;

// Effects: marks block `p` of the starter slab `s` freed. Aborts with a message when `p` is not
// a block of it or was freed already.
void starter_free(Slab* s, void* p) noexcept;

// Returns: 1 once the starter slab exists, else 0 (stats).
std::size_t starter_slab_count() noexcept;

}  // namespace ak::detail
