// How a full log becomes a block in the journal (recorder_log.hpp): zstd compression while
// recording, the writer thread's queue of handed-off buffers, and the per-thread order of blocks
// that the queue must keep. Internal to liballockit_record.so; nothing here allocates.
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <x86intrin.h>
// ZSTD_initStaticCCtx and the size estimates: a context in memory mapped here, so zstd never
// allocates and the program's allocator never sees the recorder's work.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "trace/recorder_log.hpp"

namespace ak::trace::rec {

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
  std::atomic<uint32_t> packs{0};  // compressions done (resident_log_bytes reads it)
  void* mapping = nullptr;         // the context and `out`, one mapping of mapping_bytes
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
  pk.packs.fetch_add(1, std::memory_order_relaxed);
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

uint64_t resident_log_bytes(bool fresh) {
  // The packer's context is touched as far as its first compressions reach, then reused: read
  // again (mincore) at the first sample after each of its first kWarmPacks compressions, then
  // every kPackerEvery calls, if it compressed since. (mincore takes the process's mmap lock:
  // read at every 2 ms sample, with each log's, it cost larson 5% of its wall time under the
  // recorder. Read only every kPackerEvery calls from the start, the context's 172 KiB went
  // uncounted for python3's first 0.5 s, which its recorded heap peak took in: 4% too high.)
  // The last sample reads it afresh: the flushes at exit compress a block per thread, whose
  // hashes touch pages of the context none touched before (up to 80 KiB for python3).
  constexpr uint32_t kPackerEvery = 10, kWarmPacks = 16;
  static uint32_t calls = 0, packs_seen = 0;
  static uint64_t packer = 0;
  const uint32_t packs = g_packer.packs.load(std::memory_order_relaxed);
  const bool due =
      fresh || (packs != packs_seen && (packs <= kWarmPacks || calls % kPackerEvery == 0));
  ++calls;
  if (uint64_t pages;
      g_packer.mapping && due && resident_pages(g_packer.mapping, g_packer.mapping_bytes, &pages)) {
    packer = pages * kPage;
    packs_seen = packs;
  }
  // A log is written from its start: touched as far as it ever filled (`filled_max`, kept by
  // flush_log) or fills now. Read without its lock: a sample may lag one event behind.
  // Both buffers fill alike, so the second one, once used, counts as far as the first.
  uint64_t bytes = packer;
  for (ThreadLog* l = g_logs.load(std::memory_order_acquire); l; l = l->next) {
    const size_t filled = std::max(__atomic_load_n(&l->filled_max, __ATOMIC_RELAXED),
                                   __atomic_load_n(&l->len, __ATOMIC_RELAXED));
    const size_t head = static_cast<size_t>(l->block[0] - reinterpret_cast<uint8_t*>(l));
    const size_t used = kClockBlockBytes + sizeof(BlockHeader) + filled;
    const size_t touched =
        __atomic_load_n(&l->second_used, __ATOMIC_RELAXED) ? kBlockBytes + used : used;
    bytes += std::min(sizeof(ThreadLog) + kPage - 1, head + touched + kPage - 1) & ~(kPage - 1);
  }
  return bytes;
}

namespace {

// Fills in the header of the event block in `log`'s current buffer: what the writer needs.
void seal_block(ThreadLog* log) {
  BlockHeader h{};
  std::memcpy(h.magic, kBlockMagic, 4);
  h.codec = kCodecRaw | kTicksFlag;
  h.raw_len = static_cast<uint32_t>(log->len);
  h.stored_len = h.raw_len;
  h.event_count = log->count;
  h.thread = log->thread;
  h.os_tid = log->os_tid;
  h.base_time_ns = log->base_time;
  std::memcpy(log->buf + kClockBlockBytes, &h, sizeof h);
  if (log->len > log->filled_max) log->filled_max = log->len;
}

// Writes a sealed event block (`block`: a log's buffer) after a clock block, compressed when
// pack() finds it worth it and `may_pack` (`fill_ticks`: how long it took to fill).
void write_block(uint8_t* block, uint64_t fill_ticks, bool may_pack) {
  BlockHeader h;
  std::memcpy(&h, block + kClockBlockBytes, sizeof h);
  const uint8_t* stored = block + kClockBlockBytes + sizeof(BlockHeader);
  size_t stored_len = h.raw_len;
  const size_t packed = may_pack ? pack(stored, stored_len, fill_ticks) : 0;
  if (packed) {
    h.codec = kCodecZstd | kTicksFlag;
    stored = g_packer.out;
    stored_len = packed;
  }
  h.stored_len = static_cast<uint32_t>(stored_len);
  h.crc = block_crc(h, stored, stored_len);
  std::memcpy(block + kClockBlockBytes, &h, sizeof h);
  make_clock_block(block);
  iovec v[2] = {{block, kClockBlockBytes + sizeof h}, {const_cast<uint8_t*>(stored), stored_len}};
  write_all(g_fd, v, 2);
  if (packed) release_packer();
}

// ---- the writer ---------------------------------------------------------------------------------
// A full log is handed to the recorder's own thread (the memory sampler's, which wakes for it),
// which checksums, compresses and writes it while the owner fills the log's other buffer: the
// program's threads pay for none of it while that thread keeps up (python3 demo_workload.py,
// whose threads take turns at its lock and leave a core idle: 1.43x its own time under the
// recorder, 1.24x without writing at all). Blocks of one thread must reach the file in order; a
// log has at most one block queued, and a block of a log whose other one is still queued is
// written only after it (settle): its owner takes that one back from the queue and writes both,
// or waits while the writer writes it. Any thread may write the queue's blocks (at exit, or once
// the writer stopped): they are of different logs.
struct HandedOff {
  ThreadLog* log;  // null: taken back by its owner (settle)
  uint8_t index;   // log->block[index]
  uint64_t fill_ticks;
};
constexpr uint32_t kQueueSlots = 512;
struct WriteQueue {
  SpinLock lock;                // held only to push, pop or take back
  uint32_t head = 0, tail = 0;  // entries [head, tail), modulo kQueueSlots
  HandedOff items[kQueueSlots];
};
constinit WriteQueue g_queue{};
constinit std::atomic<bool> g_writer_on{false};   // the writer thread runs
constinit std::atomic<bool> g_wake_writer{true};  // a hand-off wakes it (writer_wakes)
constinit std::atomic<uint32_t> g_handed{0};      // bumped at every hand-off (the writer's futex)
constinit std::atomic<uint32_t> g_writer_sleeps{0};

// Takes `lock`, or gives up after a few thousand tries (a crash handler: the holder may be the
// interrupted thread itself).
bool try_lock_briefly(SpinLock& lock) {
  for (int i = 0; i < 4096; ++i) {
    if (lock.try_lock()) return true;
    _mm_pause();
  }
  return false;
}

// Takes the queue's lock; `wait` false (a crash handler): only if it comes free at once.
bool lock_queue(bool wait) {
  if (!wait) return try_lock_briefly(g_queue.lock);
  g_queue.lock.lock();
  return true;
}

// Writes a handed-off block (compressed when worth it, but in a crash handler: `calm` false) and
// frees its buffer.
void write_handed(const HandedOff& q, bool calm) {
  write_block(q.log->block[q.index], q.fill_ticks, calm);
  q.log->queued[q.index].store(0, std::memory_order_release);
}

// Writes the oldest queued block; false when none is left (or the queue's lock is not free, in a
// crash handler).
bool write_oldest(bool calm) {
  HandedOff q{};
  if (!lock_queue(calm)) return false;
  while (g_queue.head != g_queue.tail && q.log == nullptr)
    q = g_queue.items[g_queue.head++ % kQueueSlots];
  g_queue.lock.unlock();
  if (q.log == nullptr) return false;
  write_handed(q, calm);
  return true;
}

// Sees `log`'s block[index] written: takes it back from the queue and writes it, or waits while
// the writer writes it. `calm` false (a crash handler): returns false rather than wait long.
bool settle(ThreadLog* log, uint8_t index, bool calm) {
  if (log->queued[index].load(std::memory_order_acquire) == 0) return true;
  HandedOff mine{};
  if (!lock_queue(calm)) return false;
  for (uint32_t i = g_queue.head; i != g_queue.tail; ++i) {
    HandedOff& q = g_queue.items[i % kQueueSlots];
    if (q.log == log && q.index == index) {
      mine = q;
      q.log = nullptr;
      break;
    }
  }
  g_queue.lock.unlock();
  if (mine.log != nullptr) {
    write_handed(mine, calm);
    return true;
  }
  for (unsigned spins = 0; log->queued[index].load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < SpinLock::kSpinsBeforeYield) {
      _mm_pause();
    } else {
      if (!calm) return false;
      sched_yield();
    }
  }
  return true;
}

// Writes `log`'s events now (compressed when worth it and `may_pack`) and empties it. Its other
// buffer is not queued (settle).
void write_now(ThreadLog* log, bool may_pack) {
  if (log->count == 0) return;
  seal_block(log);
  write_block(log->buf, __rdtsc() - log->base_time, may_pack);
  start_block(log);
}

uint8_t current_index(const ThreadLog* log) {
  return log->buf == log->block[0] ? 0 : 1;
}

void wake_writer() {
  g_handed.fetch_add(1, std::memory_order_seq_cst);
  if (g_writer_sleeps.load(std::memory_order_seq_cst))
    syscall(SYS_futex, &g_handed, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

// Queues `log`'s current buffer for the writer (waking it when `wake` and writer_wakes allows)
// and moves the log to its other one; false, having changed nothing, when no writer runs, the
// process is past its exit flush, the other buffer is still queued, or the queue is full.
bool hand_off(ThreadLog* log, bool wake) {
  if (!g_writer_on.load(std::memory_order_relaxed) || g_exiting.load(std::memory_order_relaxed))
    return false;
  const uint8_t index = current_index(log);
  if (log->queued[index ^ 1].load(std::memory_order_acquire)) return false;
  seal_block(log);
  const uint64_t fill_ticks = __rdtsc() - log->base_time;
  log->queued[index].store(1, std::memory_order_relaxed);
  g_queue.lock.lock();
  const bool room = g_queue.tail - g_queue.head < kQueueSlots;
  if (room) g_queue.items[g_queue.tail++ % kQueueSlots] = {log, index, fill_ticks};
  g_queue.lock.unlock();
  if (!room) {
    log->queued[index].store(0, std::memory_order_relaxed);
    return false;
  }
  log->buf = log->block[index ^ 1];
  if (index == 0) __atomic_store_n(&log->second_used, true, __ATOMIC_RELAXED);
  start_block(log);
  if (wake && g_wake_writer.load(std::memory_order_relaxed)) wake_writer();
  // The writer may have stopped after the check above and before the push: then nobody else
  // writes the queue.
  if (!g_writer_on.load(std::memory_order_seq_cst)) write_queue(true);
  return true;
}

}  // namespace

void flush_log(ThreadLog* log, bool may_pack, bool wake) {
  if (log->count == 0 || g_fd < 0) return;
  int saved = errno;
  if (!(may_pack && hand_off(log, wake))) {
    write_in_order(log, true, may_pack);
    flush_stacks(false);
  }
  errno = saved;
}

void writer_wakes(bool wake) {
  g_wake_writer.store(wake, std::memory_order_relaxed);
}

void writer_started() {
  g_writer_on.store(true, std::memory_order_seq_cst);
}

void write_handed_off() {
  const int saved = errno;
  write_queue(true);
  flush_stacks(false);
  errno = saved;
}

void writer_wait(long ms) {
  const uint32_t seen = g_handed.load(std::memory_order_seq_cst);
  g_writer_sleeps.store(1, std::memory_order_seq_cst);
  g_queue.lock.lock();
  const bool idle = g_queue.head == g_queue.tail;
  g_queue.lock.unlock();
  if (idle) {
    timespec ts{ms / 1000, (ms % 1000) * 1000000};
    syscall(SYS_futex, &g_handed, FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
  }
  g_writer_sleeps.store(0, std::memory_order_relaxed);
}

void writer_stopping() {
  g_writer_on.store(false, std::memory_order_seq_cst);
  write_queue(true);
}

void writer_after_fork_child() {
  // The parent's writer writes what the parent queued; the child's copies of those buffers are
  // free again, and its writer starts with its memory sampler.
  g_queue.lock.unlock();
  g_queue.head = g_queue.tail = 0;
  g_writer_on.store(false);
  g_writer_sleeps.store(0);
  for (ThreadLog* l = g_logs.load(); l; l = l->next) l->queued[0].store(0), l->queued[1].store(0);
}

void write_in_order(ThreadLog* log, bool calm, bool may_pack) {
  if (settle(log, current_index(log) ^ 1, calm)) write_now(log, may_pack);
}

void write_queue(bool calm) {
  while (write_oldest(calm)) {
  }
}

}  // namespace ak::trace::rec
