// The secure build's block checks (AK_SECURE, liballockit-secure; docs/security.md). secure.cpp
// is part of the secure build only; malloc.cpp calls these only when kSecureBuild. A pooled block
// ends in an 8-byte trailer: the request (32 bits) and a check, a kSlackByte first, then 24 bits
// keyed by the process secret and the block's address. The first 16 bytes between the request
// and the trailer (the slack) hold kSlackByte too, so a write one byte past the request is seen
// at free (a linear overflow writes them first). Freed blocks are filled with kFreedByte over
// their first 128 bytes and wait in a per-thread quarantine; the fill is checked when they leave
// it. malloc(0) returns addresses in a region no access may touch. Every report names the call,
// the kind of error and the address, and aborts without allocating.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ak::detail {

inline constexpr std::size_t kTrailerBytes = 8;
inline constexpr unsigned char kSlackByte = 0xac;
inline constexpr unsigned char kFreedByte = 0xdf;
// A size the caller does not state (plain free): no size check.
inline constexpr std::size_t kAnySize = ~std::size_t(0);

// 16 bytes as one vector (GCC's vector extension: SSE2 loads, XORs, ORs and stores).
using Bytes16 = std::uint64_t __attribute__((vector_size(16)));

// Whether [p, p + n) holds only `byte`. 16 bytes per load, no branch inside the loop and no
// alignment needed (unaligned vector loads): about two instructions per 8 bytes.
inline bool holds_only(const unsigned char* p, std::size_t n, unsigned char byte) noexcept {
  const std::uint64_t word = 0x0101010101010101ull * byte;
  const Bytes16 pattern = {word, word};
  Bytes16 diff = {0, 0};
  for (; n >= 16; n -= 16, p += 16) {
    Bytes16 v;
    std::memcpy(&v, p, 16);
    diff |= v ^ pattern;
  }
  std::uint64_t rest = diff[0] | diff[1];
  if (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    rest |= w ^ word;
    n -= 8, p += 8;
  }
  for (; n > 0; --n) rest |= *p++ ^ byte;
  return rest == 0;
}

// Fills [p, p + n) with `byte`, 16 bytes per store, inline: the lengths here are at most 112
// bytes, where a call to memset cost more than the stores. (The empty asm keeps the compiler from
// turning the loop back into that call.)
inline void fill_with(unsigned char* p, std::size_t n, unsigned char byte) noexcept {
  const std::uint64_t word = 0x0101010101010101ull * byte;
  const Bytes16 pattern = {word, word};
  for (; n >= 16; n -= 16, p += 16) {
    std::memcpy(p, &pattern, 16);
    asm("" : "+r"(p));
  }
  if (n >= 8) {
    std::memcpy(p, &word, 8);
    n -= 8, p += 8;
  }
  for (; n > 0; --n) *p++ = byte;
}

// As fill_with and holds_only over the first min(n, kMax) bytes: the full length is a constant,
// so for the common full case the compiler unrolls the stores or loads.
template <std::size_t kMax>
inline void fill_first(unsigned char* p, std::size_t n, unsigned char byte) noexcept {
  if (n >= kMax)
    fill_with(p, kMax, byte);
  else
    fill_with(p, n, byte);
}
template <std::size_t kMax>
inline bool holds_first(const unsigned char* p, std::size_t n, unsigned char byte) noexcept {
  return n >= kMax ? holds_only(p, kMax, byte) : holds_only(p, n, byte);
}

// Writes the slack canary after `request` bytes of block `p` (`bytes` long, request <= bytes - 8)
// and its trailer: two stores of at most 16 bytes.
void arm_block(void* p, std::size_t bytes, std::size_t request) noexcept;
// The request block `p` was armed with, after checking its trailer and slack; a heap overflow is
// reported naming `call`.
std::size_t checked_request(const char* call, const void* p, std::size_t bytes) noexcept;

// Fills the first 128 bytes of freed block `p` with kFreedByte, keeping its second word (the
// freed-block tag).
void fill_freed(void* p, std::size_t bytes) noexcept;
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
