// Bit and alignment helpers used on every path. Pure constexpr: no OS calls, no heap.
// Invariant: every `align` argument is a power of two (callers validate untrusted input first).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

// Places a large zero-initialised table in .lbss, which the linker puts after all of .bss (it
// stays NOBITS: no file size). The small variables then share a few pages instead of lying on
// both sides of megabytes of tables, where each one cost every process a page fault of its own.
#define AK_LARGE_ZEROED __attribute__((section(".lbss")))

// Places a small global that a process writes (or reads) as soon as it allocates in .data, even
// when it is zero: in liballockit.so, .data shares its page with the GOT, which the dynamic
// linker writes at load anyway. In .bss, each such page cost every process one page fault more,
// two when read first (zero page, then copy), and another after every fork.
#define AK_EARLY_DATA __attribute__((section(".data.ak_early")))

// Starts a hot entry point (malloc, free, operator new and their sized forms) on a cache line
// of its own. Left to the linker, where each lands moves with every change elsewhere in the
// library: malloc's fast path (99 bytes) spans two lines from a line's start and three from its
// middle, and a build that moved it by 32 bytes ran bench-malloc-simple 1.16x slower (paired, 11
// rounds) with the same instruction count (callgrind).
#define AK_HOT_ENTRY __attribute__((aligned(64)))

// Places a constant that malloc or free reads in RELRO memory (.data.rel.ro: read-only once the
// library is relocated) instead of .rodata. Both are read-only; but fork copies the page-table
// entries of the RELRO mapping, which relocation wrote, and not those of .rodata's, so every
// fork child's first malloc took a page fault on .rodata again.
#define AK_FORK_KEPT_CONST __attribute__((section(".data.rel.ro")))

namespace ak::detail {

constexpr bool is_pow2(std::size_t x) noexcept {
  return x != 0 && (x & (x - 1)) == 0;
}

constexpr std::size_t align_up(std::size_t x, std::size_t align) noexcept {
  return (x + align - 1) & ~(align - 1);
}

constexpr std::size_t align_down(std::size_t x, std::size_t align) noexcept {
  return x & ~(align - 1);
}

inline std::uintptr_t addr(const void* p) noexcept {
  return reinterpret_cast<std::uintptr_t>(p);
}

// Overflow-checked multiply: false when a*b does not fit in size_t.
constexpr bool mul_fits(std::size_t a, std::size_t b, std::size_t* out) noexcept {
  return !__builtin_mul_overflow(a, b, out);
}

}  // namespace ak::detail
