// The recorder's per-thread logs (recorder_log.hpp): registry, flushing as blocks, the
// asymmetric synchronisation with flushers of other threads' logs, thread exit.
#include "trace/recorder_log.hpp"

#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
// ZSTD_initStaticCCtx and the size estimates: a context in memory mapped here, so zstd never
// allocates and the program's allocator never sees the recorder's work.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

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

// ---- compression while recording --------------------------------------------------------------
// One zstd context for the process (level 1), in memory mapped at setup. A flush compresses its
// block when the block took at least kFillPerPack times as long to fill as compressing it takes
// (so compression costs the thread at most 1/kFillPerPack of its time) and the context is free:
// a try-lock, a flush never waits. Anything else is written raw, as before: a thread allocating
// tens of millions of times a second writes raw blocks, a program that allocates at a human pace
// gets its journal compressed, and `allockit record` has nothing left to do when it ends.
constexpr int kPackLevel = 1;
constexpr uint64_t kFillPerPack = 20;
struct Packer {
  std::atomic<uint32_t> busy{0};
  ZSTD_CCtx* cctx = nullptr;
  uint8_t* out = nullptr;
  size_t out_cap = 0;
  // Cost of compression: the fewest TSC ticks per 256 payload bytes seen (the minimum, so a
  // compression the scheduler interrupted does not stop compression for good); 0 until measured.
  std::atomic<uint64_t> ticks_per_256{0};
  void* mapping = nullptr;  // the context and `out`, one mapping of mapping_bytes
  size_t mapping_bytes = 0;
};
constinit Packer g_packer{};

void setup_packer() {
  const size_t work = ZSTD_estimateCCtxSize_usingCParams(ZSTD_getCParams(kPackLevel, kLogBytes, 0));
  const size_t out = ZSTD_compressBound(kLogBytes);
  void* m = mmap(nullptr, work + out, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return;
  g_packer.cctx = ZSTD_initStaticCCtx(m, work);
  if (!g_packer.cctx) {
    munmap(m, work + out);
    return;
  }
  g_packer.out = static_cast<uint8_t*>(m) + work;
  g_packer.out_cap = out;
  g_packer.mapping = m;
  g_packer.mapping_bytes = work + out;
}

// Compresses `len` bytes at `raw` into the packer's buffer when worth it (see above); returns
// the compressed length, with the packer held (release_packer), or 0, with it not held.
size_t pack(const uint8_t* raw, size_t len, uint64_t fill_ticks) {
  Packer& pk = g_packer;
  const uint64_t units = len / 256 + 1;
  if (!pk.cctx ||
      fill_ticks < kFillPerPack * units * pk.ticks_per_256.load(std::memory_order_relaxed) ||
      pk.busy.exchange(1, std::memory_order_acquire) != 0)
    return 0;
  // Read again under the packer: only its holder writes the estimate.
  const uint64_t seen = pk.ticks_per_256.load(std::memory_order_relaxed);
  const uint64_t t0 = __rdtsc();
  const size_t n = ZSTD_compressCCtx(pk.cctx, pk.out, pk.out_cap, raw, len, kPackLevel);
  const uint64_t per_256 = (__rdtsc() - t0) / units;
  if (seen == 0 || per_256 < seen) pk.ticks_per_256.store(per_256, std::memory_order_relaxed);
  if (!ZSTD_isError(n) && n < len) return n;
  pk.busy.store(0, std::memory_order_release);
  return 0;
}

void release_packer() {
  g_packer.busy.store(0, std::memory_order_release);
}

bool resident_pages(const void* start, size_t bytes, uint64_t* pages) {
  unsigned char vec[1024];  // pages asked per call
  *pages = 0;
  auto* p = static_cast<const uint8_t*>(start);
  for (size_t left = (bytes + kPage - 1) / kPage; left > 0;) {
    const size_t n = left < sizeof vec ? left : sizeof vec;
    if (mincore(const_cast<uint8_t*>(p), n * kPage, vec) != 0) return false;
    for (size_t i = 0; i < n; ++i) *pages += vec[i] & 1;
    p += n * kPage;
    left -= n;
  }
  return true;
}

uint64_t resident_log_bytes() {
  // The packer's context is touched as far as its first compressions reach, then reused: read
  // again every kPackerEvery calls (mincore, which takes the process's mmap lock: read at every
  // 2 ms sample, with each log's, it cost larson 5% of its wall time under the recorder).
  constexpr uint32_t kPackerEvery = 100;
  static uint32_t calls = 0;
  static uint64_t packer = 0;
  if (uint64_t pages; g_packer.mapping && calls++ % kPackerEvery == 0 &&
                      resident_pages(g_packer.mapping, g_packer.mapping_bytes, &pages))
    packer = pages * kPage;
  // A log is written from its start: touched as far as it ever filled (`filled_max`, kept by
  // flush_log) or fills now. Read without its lock: a sample may lag one event behind.
  uint64_t bytes = packer;
  for (ThreadLog* l = g_logs.load(std::memory_order_acquire); l; l = l->next) {
    const size_t filled = std::max(__atomic_load_n(&l->filled_max, __ATOMIC_RELAXED),
                                   __atomic_load_n(&l->len, __ATOMIC_RELAXED));
    const size_t head = static_cast<size_t>(l->block - reinterpret_cast<uint8_t*>(l)) +
                        kClockBlockBytes + sizeof(BlockHeader);
    bytes += std::min(sizeof(ThreadLog) + kPage - 1, head + filled + kPage - 1) & ~(kPage - 1);
  }
  return bytes;
}

// Writes the log's events as one block (zstd when pack() finds it worth it and `may_pack`) after
// a clock block, and empties it. Caller is the owner inside an append, or holds the log's lock
// with its owner not busy, or is a crash handler (committed events only, never compressed).
void flush_log(ThreadLog* log, bool may_pack) {
  if (log->count == 0 || g_fd < 0) return;
  BlockHeader h{};
  std::memcpy(h.magic, kBlockMagic, 4);
  h.codec = kCodecRaw | kTicksFlag;
  h.raw_len = static_cast<uint32_t>(log->len);
  h.event_count = log->count;
  h.thread = log->thread;
  h.os_tid = log->os_tid;
  h.base_time_ns = log->base_time;
  const uint8_t* stored = log->block + kClockBlockBytes + sizeof(BlockHeader);
  size_t stored_len = log->len;
  const size_t packed = may_pack ? pack(stored, stored_len, __rdtsc() - log->base_time) : 0;
  if (packed) {
    h.codec = kCodecZstd | kTicksFlag;
    stored = g_packer.out;
    stored_len = packed;
  }
  h.stored_len = static_cast<uint32_t>(stored_len);
  h.crc = block_crc(h, stored, stored_len);
  std::memcpy(log->block + kClockBlockBytes, &h, sizeof h);
  make_clock_block(log->block);
  int saved = errno;
  iovec v[2] = {{log->block, kClockBlockBytes + sizeof h},
                {const_cast<uint8_t*>(stored), stored_len}};
  write_all(g_fd, v, 2);
  if (packed) release_packer();
  if (log->len > log->filled_max) log->filled_max = log->len;
  start_block(log);
  flush_stacks(false);
  errno = saved;
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
  flush_log(log, true);
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

// Flushes every log; used at exit and before exec (take_locks), and on fatal signals, where
// waiting is impossible and only committed events are written.
void flush_all(bool take_locks) {
  if (take_locks) sync_with_owners();
  for (ThreadLog* l = g_logs.load(std::memory_order_acquire); l; l = l->next) {
    if (take_locks) {
      lock(l);
      while (l->busy.load(std::memory_order_acquire) && l != tl_log) {
      }
    }
    flush_log(l, take_locks);  // a crash handler writes raw: zstd is no signal handler's work
    if (take_locks) unlock(l);
  }
  flush_stacks(take_locks);
  flush_rss(take_locks);
}

}  // namespace ak::trace::rec
