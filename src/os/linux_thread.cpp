// Thread-exit hooks on Linux through pthread keys, and the coarse clock: their destructors run
// after C++ thread_local destructors, so a hook still sees frees made by those destructors.
#include <pthread.h>
#include <time.h>

#include "os/os.hpp"

namespace ak::os {

ThreadExitHook::ThreadExitHook(void (*fn)(void*)) noexcept {
  pthread_key_t key;
  ok_ = ::pthread_key_create(&key, fn) == 0;
  key_ = ok_ ? unsigned(key) : 0;
}

void ThreadExitHook::arm(void* value) noexcept {
  if (ok_) ::pthread_setspecific(pthread_key_t(key_), value);
}

bool on_fork(void (*prepare)(), void (*after)()) noexcept {
  return ::pthread_atfork(prepare, after, after) == 0;
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

void sleep_ns(std::uint64_t ns) noexcept {
  timespec ts{time_t(ns / 1'000'000'000u), long(ns % 1'000'000'000u)};
  while (::nanosleep(&ts, &ts) != 0) {
  }
}

std::uint64_t coarse_now_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::uint64_t(ts.tv_sec) * 1'000'000'000u + std::uint64_t(ts.tv_nsec);
}

}  // namespace ak::os
