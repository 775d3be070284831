// The OS layer's one contract: the only code in allockit that may include OS headers. Every
// function reports failure as a null or false result, never an exception or errno left for the
// caller. All functions are thread-safe and never allocate.
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>

#include "core/core.hpp"

namespace ak::os {

std::size_t page_size() noexcept;

// Reserve address space aligned to `align` (a power of two); no memory is usable yet.
void* reserve(std::size_t bytes, std::size_t align) noexcept;
// Make a reserved range readable and writable; pages are zero on first touch.
bool commit(void* p, std::size_t bytes) noexcept;
// Drop the contents and the resident memory of a committed range; it stays usable and reads zero.
bool decommit(void* p, std::size_t bytes) noexcept;
// Return a reserved range to the OS.
void release(void* p, std::size_t bytes) noexcept;
// Reserve and commit in one call (one mmap): the common path for pages used at once. Exempt from
// the kernel's overcommit accounting (MAP_NORESERVE): for the allocator's own regions.
void* map(std::size_t bytes, std::size_t align) noexcept;
// As map(), but accounted against the overcommit limit like glibc's own mappings, so a request no
// memory could ever back fails here (ENOMEM) instead of being granted: for user-sized blocks.
void* map_accounted(std::size_t bytes, std::size_t align) noexcept;
// Resize a mapping from map() or map_accounted(), moving it if needed (mremap; a range spanning
// several mappings moves piece by piece into a new one, accounted as map_accounted's). Returns
// the new address or null, in which case the old mapping is untouched.
void* remap(void* p, std::size_t old_bytes, std::size_t new_bytes) noexcept;
// Moves the pages of mapping range [p, p+bytes) (page multiples) to a new range and returns it;
// [p, p+bytes) stays mapped, empty (reads zero). A range spanning several mappings moves one
// piece at a time. Null when the kernel cannot (before Linux 5.7, no MREMAP_DONTUNMAP; a hole in
// the range; the limit on mappings): the range stays mapped, some of its pages maybe dropped
// (reading zero). Ranges of 8 MiB or more land at the same offset within 2 MiB, so whole page
// tables move: about 0.1 ms for a resident 128 MiB range here, where emptying it (decommit) or
// unmapping it takes 7-10 ms.
// Smaller ones go where the kernel puts them, one system call (the reservation that keeps the
// offset costs three more, which only whole page tables repay): 18, 28, 44 us for 1, 2, 4 MiB,
// against 65, 130, 270 us to empty them. The new range is the caller's to release.
void* move_pages_out(void* p, std::size_t bytes) noexcept;
// Make a committed range inaccessible (every access faults) or accessible again; its contents and
// residency are kept. Costs an mprotect: about 14 us a pair for 256 KiB resident here.
bool set_accessible(void* p, std::size_t bytes, bool accessible) noexcept;
// Ask for transparent huge pages on a range; a hint, ignored when unsupported.
void huge_page_hint(void* p, std::size_t bytes) noexcept;
// Zeroes the pages of accessible range [p, p+bytes) (page-aligned) that may hold data: those
// resident or swapped out. Pages never touched read zero already and are left alone, unfaulted.
// False when the kernel cannot tell which pages hold data (before Linux 6.7, no /proc): the
// range may then be partly cleared, and the caller clears it another way.
bool zero_backed_pages(void* p, std::size_t bytes) noexcept;
// False once zero_backed_pages found the kernel cannot scan; true before it was tried.
bool page_scan_may_work() noexcept;
// Bytes of [p, p+bytes) currently resident in RAM (p page-aligned).
std::size_t resident_bytes(const void* p, std::size_t bytes) noexcept;

// Monotonic time in nanoseconds from a cheap, coarse clock (a few ms resolution).
std::uint64_t coarse_now_ns() noexcept;
// The same clock read by a system call rather than the vDSO, for a read at load: the vDSO's code
// and data pages fault in on first use (two page faults, about 10 us here), which a short process
// that never reads the clock again pays for nothing; the call costs well under a microsecond.
std::uint64_t coarse_now_ns_by_syscall() noexcept;

// A random 64-bit value drawn once per process from the kernel (getrandom), never zero and the
// same for every caller: the key of the secure build's canaries and encoded links. Lock-free;
// after the first call, one load.
extern constinit std::atomic<std::uint64_t> g_process_secret;
std::uint64_t draw_process_secret() noexcept;  // the first call's slow path
inline std::uint64_t process_secret() noexcept {
  const std::uint64_t s = g_process_secret.load(std::memory_order_relaxed);
  return s != 0 ? s : draw_process_secret();
}

// Starts a detached thread running `fn` with a small stack; false if the OS refuses.
bool start_thread(void (*fn)()) noexcept;
// Names the calling thread (at most 15 characters) and lowers it to nice 19, so that on waking it
// does not preempt the thread that woke it. Either may be refused; the thread runs on regardless.
void become_background_thread(const char* name) noexcept;
void sleep_ns(std::uint64_t ns) noexcept;

// A mutex for the allocator's slow paths: a futex word (0 free, 1 held, 2 held with waiters), so
// it needs no C++ runtime and no constructor (constinit-able), and a child after fork() may unlock
// what the parent's prepare handler locked. Not recursive. Uncontended lock and unlock: one atomic
// read-modify-write each, no system call. A cache line of its own: waiters spin on the word
// (lock_contended) while the holder writes the state it guards, which would share the line
// otherwise (the large blocks' registry counters: two threads churning 256 KiB-1 MiB blocks ran
// 665-699 ns a pair against 750-789).
class alignas(64) Lock {
 public:
  constexpr Lock() noexcept = default;
  void lock() noexcept {
    int expected = 0;
    if (!state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                        std::memory_order_relaxed)) [[unlikely]]
      lock_contended();
  }
  void unlock() noexcept {
    if (state_.exchange(0, std::memory_order_release) == 2) [[unlikely]]
      wake_one();
  }

 private:
  void lock_contended() noexcept;
  void wake_one() noexcept;
  std::atomic<int> state_{0};
};

// Holds a Lock for a scope.
class LockGuard {
 public:
  explicit LockGuard(Lock& l) noexcept : lock_(l) { lock_.lock(); }
  ~LockGuard() { lock_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  Lock& lock_;
};

// A flag one thread sleeps on, with a timeout, and others raise: a futex word. Raising costs a
// system call only when the flag was down.
class Wakeup {
 public:
  constexpr Wakeup() noexcept = default;
  // Sleeps until the flag is raised or about `ns` passed; lowers it and returns whether it was up.
  bool wait_ns(std::uint64_t ns) noexcept;
  void raise() noexcept;

 private:
  std::atomic<int> up_{0};
};

// Whether the process has only ever had one thread (glibc's __libc_single_threaded): then no
// other thread can hold a lock at fork().
bool single_threaded() noexcept;

// The calling process's id, by system call (glibc caches none): compared with one taken at load, it
// tells a forked child from the process that loaded the library.
int process_id() noexcept;

// Registers fork handlers (pthread_atfork): `prepare` runs in the parent before fork, `after` in
// both parent and child afterwards. Returns false on failure.
bool on_fork(void (*prepare)(), void (*after)()) noexcept;
// Registers `child` to run in the child after fork (pthread_atfork). Allocates: never call it
// with an allocator lock held. Returns false on failure.
bool on_fork_child(void (*child)()) noexcept;

// Run `fn(value)` when the calling thread exits, after C++ thread_local destructors. Re-arming from
// inside `fn` runs it again (bounded by the OS). One hook per `ThreadExitHook` object.
// The hook is created on first arm (constinit-able, so no guarded static; concurrent first arms
// create it once).
class ThreadExitHook {
 public:
  constexpr explicit ThreadExitHook(void (*fn)(void*)) noexcept : fn_(fn) {}
  void arm(void* value) noexcept;  // for the calling thread; null disarms

 private:
  void (*fn_)(void*);
  unsigned key_ = 0;
  std::atomic<int> state_{0};  // 0 not created, 2 being created, 1 created, -1 refused
};

// What every OS backend provides (checked against the Linux one in linux_memory.cpp).
template <class T>
concept MemoryPrimitives = requires(T os, void* p, std::size_t n) {
  { os.reserve(n, n) } -> std::same_as<void*>;
  { os.commit(p, n) } -> std::same_as<bool>;
  { os.decommit(p, n) } -> std::same_as<bool>;
  { os.release(p, n) } -> std::same_as<void>;
  { os.page_size() } -> std::same_as<std::size_t>;
};

}  // namespace ak::os
