// Thread-exit hooks on Linux through pthread keys, and the coarse clock: their destructors run
// after C++ thread_local destructors, so a hook still sees frees made by those destructors.
#include <linux/futex.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#include "os/os.hpp"

namespace ak::os {

void ThreadExitHook::arm(void* value) noexcept {
  int state = state_.load(std::memory_order_acquire);
  if (state == 0 && state_.compare_exchange_strong(state, 2, std::memory_order_acquire)) {
    pthread_key_t key;  // pthread_key_create never allocates
    const bool ok = ::pthread_key_create(&key, fn_) == 0;
    key_ = ok ? unsigned(key) : 0;
    state = ok ? 1 : -1;
    state_.store(state, std::memory_order_release);
  }
  while (state == 2) state = state_.load(std::memory_order_acquire);  // another thread creates it
  if (state == 1) ::pthread_setspecific(pthread_key_t(key_), value);
}

namespace {
long futex(std::atomic<int>* word, int op, int value, const timespec* timeout = nullptr) noexcept {
  return ::syscall(SYS_futex, reinterpret_cast<int*>(word), op, value, timeout, nullptr, 0);
}

// A spinning waiter's pause: about 25 ns on this host's x86 cores.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

// Spins before sleeping (kLockSpins pauses, a few microseconds), as the held sections are mostly
// shorter than a futex sleep and wake-up: two threads freeing and allocating 256 KiB-1 MiB
// blocks (the large-block cache's lock, held a fraction of a microsecond a call) slept on it some
// 200 times in 80,000 calls and ran 1.83-1.96 us a call; spinning first, 1.55-1.62 us (mimalloc,
// whose large blocks are per thread, 1.25-1.28). 32, 100 or 300 pauses measured the same there;
// thread_churn (slabs to and from the cache) 0.96x, glibc_thread, mstress within noise.
constexpr int kLockSpins = 100;
}  // namespace

void Lock::lock_contended() noexcept {
  for (int i = 0; i < kLockSpins; ++i) {
    cpu_relax();
    int expected = 0;
    if (state_.load(std::memory_order_relaxed) == 0 &&
        state_.compare_exchange_weak(expected, 1, std::memory_order_acquire,
                                     std::memory_order_relaxed))
      return;
  }
  // Drepper's mutex: mark the word contended (2) and sleep until an unlock finds it free.
  int c = state_.exchange(2, std::memory_order_acquire);
  while (c != 0) {
    futex(&state_, FUTEX_WAIT_PRIVATE, 2);
    c = state_.exchange(2, std::memory_order_acquire);
  }
}

void Lock::wake_one() noexcept {
  futex(&state_, FUTEX_WAKE_PRIVATE, 1);
}

bool Wakeup::wait_ns(std::uint64_t ns) noexcept {
  if (up_.exchange(0, std::memory_order_acquire) != 0) return true;
  const timespec ts{time_t(ns / 1'000'000'000u), long(ns % 1'000'000'000u)};
  const int saved = errno;
  futex(&up_, FUTEX_WAIT_PRIVATE, 0, &ts);
  errno = saved;
  return up_.exchange(0, std::memory_order_acquire) != 0;
}

void Wakeup::raise() noexcept {
  if (up_.exchange(1, std::memory_order_release) != 0) return;
  const int saved = errno;  // free() preserves errno
  futex(&up_, FUTEX_WAKE_PRIVATE, 1);
  errno = saved;
}

bool single_threaded() noexcept {
  return __libc_single_threaded != 0;
}

int process_id() noexcept {
  return int(::syscall(SYS_getpid));
}

bool on_fork(void (*prepare)(), void (*after)()) noexcept {
  return ::pthread_atfork(prepare, after, after) == 0;
}

bool on_fork_child(void (*child)()) noexcept {
  return ::pthread_atfork(nullptr, nullptr, child) == 0;
}

namespace {
void* thread_trampoline(void* fn) {
  reinterpret_cast<void (*)()>(fn)();
  return nullptr;
}
}  // namespace

bool start_thread(void (*fn)()) noexcept {
  pthread_attr_t attr;
  if (::pthread_attr_init(&attr) != 0) return false;
  ::pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  ::pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_t tid;
  const bool ok =
      ::pthread_create(&tid, &attr, thread_trampoline, reinterpret_cast<void*>(fn)) == 0;
  ::pthread_attr_destroy(&attr);
  return ok;
}

void become_background_thread(const char* name) noexcept {
  ::pthread_setname_np(::pthread_self(), name);
  ::setpriority(PRIO_PROCESS, int(::syscall(SYS_gettid)), 19);  // this thread only (Linux)
}

void sleep_ns(std::uint64_t ns) noexcept {
  timespec ts{time_t(ns / 1'000'000'000u), long(ns % 1'000'000'000u)};
  while (::nanosleep(&ts, &ts) != 0) {
  }
}

constinit std::atomic<std::uint64_t> g_process_secret{0};

std::uint64_t draw_process_secret() noexcept {
  // First use: the kernel's entropy; should it refuse (a seccomp filter), the clock and ASLR'd
  // addresses, which still differ per process. Racing first callers agree through the CAS.
  const int saved = errno;
  std::uint64_t fresh = 0;
  if (::getrandom(&fresh, sizeof fresh, GRND_NONBLOCK) != sizeof fresh) {
    timespec t{};
    ::clock_gettime(CLOCK_MONOTONIC, &t);
    fresh = (std::uint64_t(t.tv_nsec) << 32) ^ std::uint64_t(t.tv_sec) ^
            reinterpret_cast<std::uintptr_t>(&g_process_secret) ^
            reinterpret_cast<std::uintptr_t>(&t);
    fresh *= 0x9E3779B97F4A7C15ull;
  }
  errno = saved;
  fresh |= 1;  // never zero
  std::uint64_t expected = 0;
  return g_process_secret.compare_exchange_strong(expected, fresh, std::memory_order_relaxed)
             ? fresh
             : expected;
}

namespace {
std::uint64_t to_ns(const timespec& ts) {
  return std::uint64_t(ts.tv_sec) * 1'000'000'000u + std::uint64_t(ts.tv_nsec);
}
}  // namespace

std::uint64_t coarse_now_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return to_ns(ts);
}

std::uint64_t coarse_now_ns_by_syscall() noexcept {
  timespec ts{};
  ::syscall(SYS_clock_gettime, CLOCK_MONOTONIC_COARSE, &ts);
  return to_ns(ts);
}

}  // namespace ak::os
