// The recorder's per-thread logs (recorder_log.hpp): registry, clock and file primitives, the
// asymmetric synchronisation with flushers of other threads' logs, thread exit. How a full log
// becomes a block in the file is recorder_writer.cpp's.
#include "trace/recorder_log.hpp"

#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

namespace ak::trace::rec {

std::atomic<ThreadLog*> g_logs{nullptr};
std::atomic<uint32_t> g_next_thread{1};
int g_fd = -1;
std::atomic<bool> g_exiting{false};
std::atomic<bool> g_sync{false};
pthread_key_t g_key;
constinit thread_local ThreadLog* tl_log = nullptr;
constinit thread_local bool tl_exited = false;
constinit thread_local uint32_t tl_thread = 0;
constinit thread_local int tl_busy = 0;
std::atomic<uint32_t> g_coarse_tick{0};
constinit thread_local uint32_t tl_unstamped_left = 0;
constinit thread_local uint32_t tl_tick_seen = 0;

uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Fills a clock block at `out` (kClockBlockBytes).
void make_clock_block(uint8_t* out) {
  uint64_t pt[2];
  pt[0] = __rdtsc();
  pt[1] = mono_ns();
  BlockHeader h{};
  std::memcpy(h.magic, kBlockMagic, 4);
  h.codec = kCodecClock;
  h.stored_len = h.raw_len = 16;
  h.base_time_ns = pt[1];
  h.crc = block_crc(h, pt, 16);
  std::memcpy(out, &h, sizeof h);
  std::memcpy(out + sizeof h, pt, 16);
}

void write_all(int fd, const void* data, size_t n) {
  iovec v{const_cast<void*>(data), n};
  write_all(fd, &v, 1);
}

// Writes every byte of `v` with as few writev(2) calls as it takes (one unless interrupted): a
// block goes out in one call, so blocks of different threads never interleave.
void write_all(int fd, iovec* v, int n) {
  while (n > 0) {
    ssize_t w = writev(fd, v, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // disk full or closed: drop the block, never block the program
    auto done = static_cast<size_t>(w);
    for (; n > 0 && done >= v->iov_len; ++v, --n) done -= v->iov_len;
    if (n > 0) {
      v->iov_base = static_cast<char*>(v->iov_base) + done;
      v->iov_len -= done;
    }
  }
}

void lock(ThreadLog* log) {
  while (log->lock.exchange(1, std::memory_order_acquire)) {
  }
}
void unlock(ThreadLog* log) {
  log->lock.store(0, std::memory_order_release);
}

// Asymmetric synchronisation: the owner's append costs two plain stores; a thread that must
// flush other threads' logs (exit, exec) sets g_sync and issues membarrier(2), after which
// every owner either is seen busy (the flusher waits) or sees g_sync and takes the lock.
int g_membarrier_cmd = 0;  // 0: unavailable, so g_sync is set from the start

void sync_with_owners() {
  g_sync.store(true, std::memory_order_seq_cst);
  if (g_membarrier_cmd) syscall(__NR_membarrier, g_membarrier_cmd, 0, 0);
}

void setup_membarrier() {
  long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
      syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
    g_membarrier_cmd = MEMBARRIER_CMD_PRIVATE_EXPEDITED;
  else if (cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL))
    g_membarrier_cmd = MEMBARRIER_CMD_GLOBAL;
  else
    g_sync.store(true);
}

void thread_exit(void* p) {
  auto* log = static_cast<ThreadLog*>(p);
  ++tl_busy;
  lock(log);
  flush_log(log, true, false);  // the log goes idle: the writer takes it when it next wakes
  unlock(log);
  tl_log = nullptr;
  tl_exited = true;
  log->owned.store(0, std::memory_order_release);
  stacks_thread_exit();
  --tl_busy;
}

// The calling thread's log: reuses one left by an exited thread, else maps a new one.
ThreadLog* acquire_log() {
  for (ThreadLog* l = g_logs.load(std::memory_order_acquire); l; l = l->next) {
    uint32_t zero = 0;
    if (l->owned.load(std::memory_order_relaxed) == 0 && l->owned.compare_exchange_strong(zero, 1))
      return l;
  }
  void* m =
      mmap(nullptr, sizeof(ThreadLog), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  auto* l = new (m) ThreadLog;  // default-initialised: the event buffer's pages stay untouched
  l->owned.store(1);
  ThreadLog* head = g_logs.load();
  do l->next = head;
  while (!g_logs.compare_exchange_weak(head, l));
  return l;
}

// The calling thread's first event: take a log and register the thread-exit flush.
ThreadLog* first_log() {
  Guard g;  // pthread_setspecific may allocate: that call is not the program's
  ThreadLog* l = acquire_log();
  if (!l) return nullptr;
  if (tl_thread == 0) tl_thread = g_next_thread.fetch_add(1);
  l->thread = tl_thread;
  l->os_tid = static_cast<uint32_t>(syscall(SYS_gettid));
  // A fresh log starts at now; a reused one at its last time, earlier than any call of this thread.
  if (l->state.time_ns == 0) l->state.time_ns = stamp_ticks();
  start_block(l);
  tl_log = l;
  if (!tl_exited) pthread_setspecific(g_key, l);  // else record() hands it back after the call
  return l;
}

// A call the thread makes after its log's thread-exit flush (glibc's __libc_thread_freeres frees
// the thread's buffers after every key destructor ran): the log taken for it is written and
// handed back at once. Kept, it would be lost to reuse, one per exited thread.
void hand_back_late_log(ThreadLog* log) {
  Guard g;
  lock(log);
  flush_log(log, false);
  unlock(log);
  tl_log = nullptr;
  log->owned.store(0, std::memory_order_release);
}

__attribute__((noinline)) void flush_from_append(ThreadLog* log) {
  flush_log(log, true);
  if (!rss_sampler_running()) start_rss_sampler();  // a fork child's first flush
  sample_at_flush();
}

void record_locked(ThreadLog* log, Call k) {
  lock(log);
  append(log, k);
  unlock(log);
}

// Writes every log and every queued block; used at exit and before exec (take_locks), and on
// fatal signals, where waiting is impossible and only committed events are written, raw (zstd is
// no signal handler's work). A crash handler that cannot see a log's queued block written leaves
// the log's newer events unwritten rather than out of order.
void flush_all(bool take_locks) {
  if (take_locks) sync_with_owners();
  for (ThreadLog* l = g_logs.load(std::memory_order_acquire); l; l = l->next) {
    if (take_locks) {
      lock(l);
      while (l->busy.load(std::memory_order_acquire) && l != tl_log) {
      }
    }
    write_in_order(l, take_locks, take_locks);
    if (take_locks) unlock(l);
  }
  write_queue(take_locks);
  flush_stacks(take_locks);
  flush_rss(take_locks);
}

}  // namespace ak::trace::rec
