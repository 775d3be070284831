// The secure build's block checks (AK_SECURE, liballockit-secure; docs/security.md). secure.cpp
// is part of the secure build only; malloc.cpp calls these only when kSecureBuild. A pooled block
// ends in an 8-byte trailer: the request (32 bits) and a check, a kSlackByte first, then 24 bits
// keyed by the process secret and the block's address. The first 16 bytes between the request
// and the trailer (the slack) hold kSlackByte too, so a write one byte past the request is seen
// at free (a linear overflow writes them first). Freed blocks are filled with kFreedByte over
// their first 128 bytes, keeping their freed-block tag, and wait in a per-thread quarantine; the
// fill and the tag are checked when they leave it. The checks on the malloc and free paths are
// inline and take a fixed number of 16-byte loads and stores. malloc(0) returns addresses in a
// region no access may touch. Every report names the call, the kind of error and the address, and
// aborts without allocating.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "allockit/detail/size_classes.hpp"
#include "os/os.hpp"

namespace ak::detail {

inline constexpr std::size_t kTrailerBytes = 8;
inline constexpr unsigned char kSlackByte = 0xac;
inline constexpr unsigned char kFreedByte = 0xdf;
// A size the caller does not state (plain free): no size check.
inline constexpr std::size_t kAnySize = ~std::size_t(0);

// 16 bytes as one vector (GCC's vector extension: SSE2 loads, XORs, ORs and stores).
using Bytes16 = std::uint64_t __attribute__((vector_size(16)));

inline Bytes16 splat(unsigned char byte) noexcept {
  const std::uint64_t word = 0x0101010101010101ull * byte;
  return Bytes16{word, word};
}
inline Bytes16 load16(const unsigned char* p) noexcept {
  Bytes16 v;
  std::memcpy(&v, p, 16);
  return v;
}
inline void store16(unsigned char* p, Bytes16 v) noexcept {
  std::memcpy(p, &v, 16);
}

// Whether [p, p + n) holds only `byte`. 16 bytes per load, no branch inside the loop and no
// alignment needed (unaligned vector loads): about two instructions per 8 bytes.
inline bool holds_only(const unsigned char* p, std::size_t n, unsigned char byte) noexcept {
  const Bytes16 pattern = splat(byte);
  Bytes16 diff = {0, 0};
  for (; n >= 16; n -= 16, p += 16) diff |= load16(p) ^ pattern;
  std::uint64_t rest = diff[0] | diff[1];
  if (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    rest |= w ^ pattern[0];
    n -= 8, p += 8;
  }
  for (; n > 0; --n) rest |= *p++ ^ byte;
  return rest == 0;
}

// Fills [p, p + n) with `byte`, 16 bytes per store, inline: the lengths here are short (a
// realloc's slack, at most 16 bytes), where a call to memset costs more than the stores. (The
// empty asm keeps the compiler from turning the loop back into that call.)
inline void fill_with(unsigned char* p, std::size_t n, unsigned char byte) noexcept {
  const Bytes16 pattern = splat(byte);
  for (; n >= 16; n -= 16, p += 16) {
    store16(p, pattern);
    asm("" : "+r"(p));
  }
  if (n >= 8) {
    std::memcpy(p, &pattern[0], 8);
    n -= 8, p += 8;
  }
  for (; n > 0; --n) *p++ = byte;
}

// class_size() as a table, for the malloc fast path: one load where its formula takes a dozen
// instructions. Only the secure build reads it (its pages are never touched otherwise).
struct SecureClassBytes {
  std::uint32_t of[kHeapClasses];
  constexpr SecureClassBytes() : of{} {
    for (unsigned c = 0; c < kHeapClasses; ++c) of[c] = std::uint32_t(class_size(c));
  }
};
inline constexpr SecureClassBytes kSecureClassBytes;

// ---- trailer and slack ----------------------------------------------------------------------

// The low half of a block's trailer: its first byte (the one an overflow writes first) is
// kSlackByte, so a one-byte overflow is caught whatever the key, unless it writes that very byte
// (never a string's terminating zero); the other 24 bits are keyed by the process secret and the
// block's address, so a longer overwrite cannot forge them.
// The secret is read as drawn: every block is armed after it was (secure_pooled draws it, and a
// pop needs a heap, which draws it first), so the paths here need no call to draw it.
inline std::uint32_t trailer_check(const void* p, std::size_t request) noexcept {
  const std::uint64_t secret = os::g_process_secret.load(std::memory_order_relaxed);
  const std::uint64_t h =
      (reinterpret_cast<std::uintptr_t>(p) ^ (std::uint64_t(request) << 40) ^ secret) *
      0x9E3779B97F4A7C15ull;
  return (std::uint32_t(h >> 32) & ~0xffu) | kSlackByte;
}
// Writes block `p`'s trailer (its last 8 bytes) for a request of `request` bytes.
inline void put_trailer(void* p, std::size_t bytes, std::size_t request) noexcept {
  const std::uint64_t trailer = (std::uint64_t(request) << 32) | trailer_check(p, request);
  std::memcpy(static_cast<unsigned char*>(p) + bytes - kTrailerBytes, &trailer, sizeof trailer);
}

// The 16 bytes of a block (`bytes` long) that hold the first 16 bytes of the slack after
// `request`, or all of it when shorter: they start at the request when 16 slack bytes follow it,
// else 16 bytes before the trailer (at 0 in a 16-byte block). The slack is bytes [lo, hi) of the
// window.
struct SlackWindow {
  std::size_t at;
  unsigned lo, hi;
};
inline SlackWindow slack_window(std::size_t bytes, std::size_t request) noexcept {
  const std::size_t room = bytes - kTrailerBytes;       // request <= room
  const std::size_t last = room >= 16 ? room - 16 : 0;  // the last window inside the room
  const std::size_t at = request < last ? request : last;
  const std::size_t hi = room - at < 16 ? room - at : 16;
  return SlackWindow{at, unsigned(request - at), unsigned(hi)};
}

// Arms a block just handed out (nothing of it written yet) for a request of `request` bytes
// (request <= bytes - 8): the slack window filled with kSlackByte and the trailer, two stores.
// The window may cover bytes before the request; they are the caller's to write.
inline void arm_new(void* p, std::size_t bytes, std::size_t request) noexcept {
  store16(static_cast<unsigned char*>(p) + slack_window(bytes, request).at, splat(kSlackByte));
  put_trailer(p, bytes, request);
}

// As arm_new for a block whose bytes before `request` hold data (realloc in place): the slack is
// filled exactly.
void arm_block(void* p, std::size_t bytes, std::size_t request) noexcept;

// 16 zero bytes, 16 0xff bytes, 16 zero bytes: the 16 bytes at kLaneMask + 16 - lo are 0xff
// from lane lo on, those at kLaneMask + 32 - hi up to lane hi.
alignas(64) inline constexpr unsigned char kLaneMask[48] = {
    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0};

// Whether the slack of block `c` after `request` holds kSlackByte over its first 16 bytes: one
// load, the window's slack lanes selected by two masks.
inline bool slack_intact(const unsigned char* c, std::size_t bytes, std::size_t request) noexcept {
  const SlackWindow w = slack_window(bytes, request);
  const Bytes16 in_slack = load16(kLaneMask + 16 - w.lo) & load16(kLaneMask + 32 - w.hi);
  const Bytes16 diff = (load16(c + w.at) ^ splat(kSlackByte)) & in_slack;
  return (diff[0] | diff[1]) == 0;
}

[[noreturn]] void report_overflow(const char* call, const void* p, bool trailer) noexcept;

// The request block `p` (`bytes` long) was armed with, after checking its trailer and slack; a
// heap overflow is reported naming `call`.
inline std::size_t checked_request(const char* call, const void* p, std::size_t bytes) noexcept {
  const auto* c = static_cast<const unsigned char*>(p);
  std::uint64_t trailer;
  std::memcpy(&trailer, c + bytes - kTrailerBytes, sizeof trailer);
  const std::size_t request = trailer >> 32;
  if (request > bytes - kTrailerBytes || std::uint32_t(trailer) != trailer_check(p, request))
      [[unlikely]]
    report_overflow(call, p, true);
  if (!slack_intact(c, bytes, request)) [[unlikely]]
    report_overflow(call, p, false);
  return request;
}

// ---- freed blocks ---------------------------------------------------------------------------

// The bytes of a freed block that are filled and checked: its first two cache lines, all of a
// block up to 128 bytes (most blocks of most programs). Filling and checking whole blocks cost
// 2.3x the time on bench-malloc-simple (blocks up to 4 KiB) for writes deeper than that.
inline constexpr std::size_t kFilledBytes = 128;

// Fills [p, p + n) with kFreedByte, 16 <= n <= kFilledBytes: 16-byte stores, the last one ending
// at n (overlapping the one before when n is not a multiple of 16).
inline void fill_span(unsigned char* p, std::size_t n) noexcept {
#pragma GCC unroll 8
  for (std::size_t i = 0; i + 16 < n; i += 16) store16(p + i, splat(kFreedByte));
  store16(p + n - 16, splat(kFreedByte));
}
// Whether [p, p + n) holds kFreedByte, but for its second word, which must hold `tag` (n a
// multiple of 8); as fill_span, 16-byte loads, the last one ending at n.
inline bool span_holds_fill(const unsigned char* p, std::size_t n, std::uint64_t tag) noexcept {
  const Bytes16 fill = splat(kFreedByte);
  Bytes16 diff = load16(p) ^ Bytes16 { fill[0], tag };
#pragma GCC unroll 8
  for (std::size_t i = 16; i + 16 < n; i += 16) diff |= load16(p + i) ^ fill;
  if (n >= 32) {
    diff |= load16(p + n - 16) ^ fill;
  } else if (n == 24) {
    std::uint64_t w;
    std::memcpy(&w, p + 16, 8);
    diff[0] |= w ^ fill[0];
  }
  return (diff[0] | diff[1]) == 0;
}

// Fills the first kFilledBytes of freed block `p` (`bytes` >= 16 long) with kFreedByte and puts
// `tag` (its freed-block tag) in its second word.
inline void fill_freed(void* p, std::size_t bytes, std::uint64_t tag) noexcept {
  auto* c = static_cast<unsigned char*>(p);
  if (bytes >= kFilledBytes)
    fill_span(c, kFilledBytes);
  else
    fill_span(c, bytes);
  std::memcpy(c + 8, &tag, sizeof tag);
}
// Whether freed block `p` still holds what fill_freed wrote.
inline bool holds_freed_fill(const void* p, std::size_t bytes, std::uint64_t tag) noexcept {
  const auto* c = static_cast<const unsigned char*>(p);
  return bytes >= kFilledBytes ? span_holds_fill(c, kFilledBytes, tag)
                               : span_holds_fill(c, bytes, tag);
}

// Puts freed, filled block `p` in this thread's quarantine. A block that leaves it has its fill
// checked (a write after free is reported) and goes back to its slab. The quarantine holds up
// to 64 blocks and 1 MiB per thread; a block leaves it at random, so its reuse cannot be timed.
// Emptied (checked, given back) at thread exit.
void quarantine_put(void* p, std::size_t bytes) noexcept;
// Empties this thread's quarantine (checked) when an allocation finds no memory. Returns whether
// it held any block.
bool quarantine_drain() noexcept;
// Checks the fill of every block in this thread's quarantine (at process exit).
void quarantine_check() noexcept;

// Zero-size blocks: distinct 16-byte-aligned addresses in a reserved 64 MiB region that is never
// made accessible, so every read and write through them faults. A freed one is handed out again
// only once every slot was used. Null (the caller then gives a block with no usable byte) when
// 4M are live or the region cannot be reserved.
void* zero_alloc() noexcept;
bool in_zero_region(const void* p) noexcept;
// Frees zero-size block `p`, reporting a double free or a pointer never handed out.
void zero_free(const char* call, void* p) noexcept;
// Reports (naming `call`) unless `p` is a live zero-size block.
void zero_check_live(const char* call, const void* p) noexcept;

}  // namespace ak::detail
