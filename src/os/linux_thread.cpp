// Thread-exit hooks on Linux through pthread keys: their destructors run after C++ thread_local
// destructors, so a hook still sees frees made by those destructors.
#include <pthread.h>

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

}  // namespace ak::os
