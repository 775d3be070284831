// The recorder's per-thread event logs: what each interposed call appends to, and how logs reach
// the journal file (one block per write(2)). Internal to liballockit_record.so (recorder.cpp,
// recorder_log.cpp and recorder_writer.cpp); nothing here allocates. A log belongs to one
// thread; other threads touch it only through flush_all(), synchronised by `busy`, `lock` and
// membarrier(2) (see flush_all), and the writer thread a buffer the log handed it (`queued`).
#pragma once
#include <pthread.h>
#include <sched.h>
#include <sys/uio.h>
#include <x86intrin.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "trace/codec.hpp"

namespace ak::trace::rec {

// A spin lock for the recorder's shared buffers (memory samples, stack definitions): held only
// while a buffer is filled or written, never while waiting on the program. Signal handlers take
// it with try_lock. A waiter yields its core after a short spin: the holder may be writing to the
// journal or reading /proc, or descheduled, and on a machine of two cores a waiter that kept
// spinning took the core the holder needed (under valgrind, which runs one thread at a time, the
// sampler's wait on the exit flush was three quarters of a recording's instructions).
struct SpinLock {
  std::atomic<uint32_t> held{0};
  bool try_lock() { return held.exchange(1, std::memory_order_acquire) == 0; }
  void lock() {
    for (unsigned spins = 0; !try_lock();)
      while (held.load(std::memory_order_relaxed) != 0)
        if (++spins < kSpinsBeforeYield)
          _mm_pause();
        else
          sched_yield();
  }
  static constexpr unsigned kSpinsBeforeYield = 100;
  void unlock() { held.store(0, std::memory_order_release); }
};

// ---- per-thread logs ------------------------------------------------------------------------
constexpr size_t kLogBytes = 64 * 1024;
constexpr size_t kClockBlockBytes = sizeof(BlockHeader) + 16;
constexpr size_t kBlockBytes = kClockBlockBytes + sizeof(BlockHeader) + kLogBytes;
// Every field but `block` is initialised, so `new ThreadLog` writes the header's cache lines only
// and the buffers' pages are touched as events fill them. A log fills its two buffers in turn:
// while the recorder's writer thread writes one (hand_off), the owner fills the other.
struct ThreadLog {
  ThreadLog* next = nullptr;       // registry link, never unlinked
  std::atomic<uint32_t> busy{0};   // set by the owner while it appends (plain stores, no fence)
  std::atomic<uint32_t> lock{0};   // taken by flushers of other threads' logs, and by the owner
                                   // whenever g_sync is set
  std::atomic<uint32_t> owned{0};  // 1 while a live thread uses this log
  uint32_t thread = 0, os_tid = 0, count = 0;
  uint64_t base_time = 0;
  CodecState state;
  size_t len = 0;            // committed payload bytes; an event is counted only once fully written
  size_t filled_max = 0;     // the most `len` has been at a flush: the payload's pages touched
  uint8_t* buf = block[0];   // the buffer events go to: block[0] or block[1]
  bool second_used = false;  // block[1] has held events (its pages count as the recorder's)
  // queued[i]: block[i] waits for the writer or is being written; cleared once it is written.
  std::atomic<uint32_t> queued[2] = {0, 0};
  // A clock block, then the event block's header and payload: written with one write(2).
  alignas(8) uint8_t block[2][kBlockBytes];
};

extern std::atomic<ThreadLog*> g_logs;  // registry of every log, never shrinks
extern std::atomic<uint32_t> g_next_thread;
extern int g_fd;                     // journal file; -1: not recording
extern std::atomic<bool> g_exiting;  // after the exit flush, every event is written at once
extern std::atomic<bool> g_sync;     // flushers of other threads' logs are at work
extern pthread_key_t g_key;          // its destructor flushes a thread's log at thread exit

extern constinit thread_local ThreadLog* tl_log;
extern constinit thread_local bool tl_exited;  // past its log's thread-exit flush (thread_exit)
extern constinit thread_local uint32_t tl_thread;
extern constinit thread_local int
    tl_busy;  // >0 inside the recorder: nested calls pass straight through

struct Guard {  // marks the thread as inside the recorder (its own calls are not journaled)
  Guard() { ++tl_busy; }
  ~Guard() { --tl_busy; }
};

// Event times are TSC ticks (~10 ns to read, against ~25 for clock_gettime); every flush writes
// a clock block pairing the TSC with CLOCK_MONOTONIC, and readers convert through them.
// Every stamp (a free's or realloc's entry, an allocation's return) is one rdtsc, which does not
// wait for the call's loads: a malloc that got a block another thread just freed may be stamped a
// little before that free. The reader matches such pairs (timeline.cpp, kStampSlackNs). rdtscp,
// which waits, cost 9 ns a call here: half the recorder's cost on a malloc/free loop.
inline uint64_t stamp_ticks() {
  return __rdtsc();
}

// Stamps of plain calls (all but realloc, whose duration needs both ends). The rdtsc is half of
// the recorder's cost on a malloc/free loop, so each thread reads the clock on one call in
// kStampEvery, and on the first call after the coarse tick moved: every memory sample advances
// g_coarse_tick (every 2 ms, 8 at most: recorder_rss.cpp), so a program that calls rarely still
// stamps every call. The calls between go unstamped (0; kUnstampedFlag): each lies between its
// thread's stamps around it, and readers place it there and match it across threads within that
// span (timeline.cpp). A thread that blocks between two stamps (a join, Python's GIL) leaves its
// calls a span of up to two ticks, in which other threads may take and free blocks at the same
// addresses; the reader orders such calls by the addresses they share (timeline_sampled_test.cpp
// measures how rarely it picks another order than the program's). Cost of an unstamped call: three
// loads, a compare and a decrement.
constexpr uint32_t kStampEvery = 8;
extern std::atomic<uint32_t> g_coarse_tick;
extern constinit thread_local uint32_t tl_unstamped_left;  // calls left before the next stamp
extern constinit thread_local uint32_t tl_tick_seen;       // g_coarse_tick at the last stamp
inline uint64_t sampled_stamp() {
  const uint32_t tick = g_coarse_tick.load(std::memory_order_relaxed);
  if (tl_unstamped_left > 0 && tick == tl_tick_seen) [[likely]] {
    --tl_unstamped_left;
    return 0;
  }
  tl_unstamped_left = kStampEvery - 1;
  tl_tick_seen = tick;
  return stamp_ticks();
}

uint64_t mono_ns();
void write_all(int fd, const void* data, size_t n);
void write_all(int fd, iovec* v, int n);
void make_clock_block(uint8_t* out);  // kClockBlockBytes: a clock block for this instant
void setup_packer();  // the zstd context flushes compress with (recorder_writer.cpp)
constexpr size_t kPage = 4096;
// The resident pages of [start, start + bytes) (start page-aligned), by mincore into *pages;
// false when mincore fails.
bool resident_pages(const void* start, size_t bytes, uint64_t* pages);
// Resident bytes of the threads' logs (as far as each has filled) and the packer (mincore, now
// and then; now when `fresh`): the share of RssAnon a memory sample leaves out as the
// recorder's (recorder_writer.cpp). Caller holds the memory samples' lock (recorder_rss.cpp).
uint64_t resident_log_bytes(bool fresh);

// Memory samples (recorder_rss.cpp). start_rss_sampler takes a first sample and starts the
// sampler thread (once per process; again in a fork child); flush_rss writes the buffered
// samples, after one more when `final_sample` (exit, exec), else only if the buffer is free
// (crash handlers). sample_at_flush takes a sample when one is due, from a log's flush, so a
// program that allocates needs no wake-up of the sampler thread. count_recorder_bytes adds to the
// recorder's own memory each sample carries, beside resident_log_bytes.
void start_rss_sampler();
bool rss_sampler_running();
void rss_after_fork_child();
void flush_rss(bool final_sample);
void sample_at_flush();
void count_recorder_bytes(size_t bytes);
void uncount_recorder_bytes(size_t bytes);
uint64_t anon_bytes_now();  // RssAnon of this instant (one read of /proc/self/statm)
// The samples' non-heap share (recorder_rss.cpp). setup_memory_samples runs once, before the
// program's first thread, with a symbol of the program's allocator (whose own object counts as
// heap). create_registered_thread is the pthread_create wrapper's (recorder.cpp): the thread it
// starts through `create` registers its stack as it starts and leaves the register as it exits.
void setup_memory_samples(const void* allocator_symbol);
using CreateThread = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
int create_registered_thread(CreateThread create, pthread_t* thread, const pthread_attr_t* attr,
                             void* (*fn)(void*), void* arg);
// Writes the log's events and empties it: hands its buffer to the writer thread when that runs
// and `may_pack` (no crash handler, not past exit), waking it when `wake`; else writes it here,
// after the log's block handed off before it.
void flush_log(ThreadLog* log, bool may_pack, bool wake = true);
// The writer thread's side (the memory sampler's thread, recorder_rss.cpp): writes every block
// handed off so far; writer_wait sleeps up to `ms` or until a block is handed off. Logs are
// handed off from writer_started on, until writer_stopping, which the thread calls before it
// leaves for good: blocks handed off after it are written by their threads.
// writer_wakes says whether a hand-off wakes the thread (else it writes what it finds when it
// next wakes to sample). writer_after_fork_child forgets the parent's queue.
void writer_started();
void writer_wakes(bool wake);
void write_handed_off();
void writer_wait(long ms);
void writer_stopping();
void writer_after_fork_child();
// flush_all's and flush_log's: writes `log` now (compressed when worth it and `may_pack`), after
// its block handed off before it, or, in a crash handler (`calm` false) that cannot see that one
// written, not at all; write_queue writes every block still handed off.
void write_in_order(ThreadLog* log, bool calm, bool may_pack);
void write_queue(bool calm);

// Call stacks (recorder_stacks.cpp). setup_stacks maps the tables and writes the first module
// snapshot (depth 0: no stacks); capture_stack returns the calling allocation's stack id (0 when
// unknown); flush_stacks writes new definitions and a due module snapshot, waiting for the
// writer when `wait`, else only if it is free (flushes of logs, crash handlers).
void setup_stacks(uint32_t depth, bool frame_pointers);
extern constinit uint32_t g_stack_depth;  // N; 0: no stacks (set once, before any recording)
uint32_t capture_stack();
void flush_stacks(bool wait);
void stacks_after_fork_child();
void stacks_thread_exit();  // from thread_exit: the thread's unwinder cache is no longer counted
void flush_all(bool take_locks);
void setup_membarrier();
void thread_exit(void* log);

__attribute__((noinline)) ThreadLog* first_log();
__attribute__((noinline)) void flush_from_append(ThreadLog* log);

inline ThreadLog* my_log() {
  if (tl_log) [[likely]]
    return tl_log;
  return first_log();
}

// One call's fields, as encode_call takes them.
struct Call {
  Op op;
  uint64_t time, a, b, c, result;
  uint32_t duration, stack;
};

__attribute__((noinline)) void record_locked(ThreadLog* log, Call k);
__attribute__((noinline)) void hand_back_late_log(ThreadLog* log);

// Encodes call `k` at the end of `log`'s payload (which has room for it) and counts it.
[[gnu::always_inline]] inline void encode_into(ThreadLog* log, const Call& k) {
  uint8_t* payload = log->buf + kClockBlockBytes + sizeof(BlockHeader);
  uint8_t* end = encode_call(log->state, payload + log->len, k.op, k.time, k.a, k.b, k.c, k.result,
                             k.duration, k.stack, k.time != 0);
  log->len = static_cast<size_t>(end - payload);
  ++log->count;
}

// Empties `log` and starts its next block at the log's latest time: the block's first event is
// a delta from it (an unstamped first call takes it as its lower bound), so no event needs to
// know whether it is a block's first. Pointer deltas start again from 0: a block decodes alone.
inline void start_block(ThreadLog* log) {
  log->count = 0;
  log->len = 0;
  log->base_time = log->state.time_ns;
  log->state = CodecState{log->base_time, 0};
}

// Appends call `k`; a time of 0 is an unstamped call (sampled_stamp), whose time readers take
// from the log's previous one.
[[gnu::always_inline]] inline void append(ThreadLog* log, const Call& k) {
  encode_into(log, k);
  if (log->len + kMaxEventBytes > kLogBytes || g_exiting.load(std::memory_order_relaxed))
      [[unlikely]]
    flush_from_append(log);
}

// The owner's side of the flush protocol around an append: marks `log` busy (plain stores, no
// fence but the compiler's) and returns true, unless flushers of other threads' logs are at work
// (g_sync): then it leaves the log as it was and returns false, and the call goes to
// record_locked. leave_log ends a true one.
[[gnu::always_inline]] inline bool enter_log(ThreadLog* log) {
  log->busy.store(1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (g_sync.load(std::memory_order_relaxed)) [[unlikely]] {
    log->busy.store(0, std::memory_order_release);
    return false;
  }
  return true;
}
[[gnu::always_inline]] inline void leave_log(ThreadLog* log) {
  log->busy.store(0, std::memory_order_release);
}

// Whether `log` (the calling thread's, or null) takes the next event on the fast path: with
// room for it and one more without a flush. Otherwise `record` does it all. (Once the process
// exits, g_sync sends every event to record_locked, which writes it at once: enter_log.)
[[gnu::always_inline]] inline bool takes_fast_append(const ThreadLog* log) {
  return log != nullptr && log->len + 2 * kMaxEventBytes <= kLogBytes;
}

// Appends call `k` to `log`, which takes_fast_append said yes to; false, having written nothing,
// while flushers are at work (enter_log), and the caller hands `k` to record_locked. No call, so
// the interposed functions that use it need no stack frame: every slow case leaves them by a tail
// call.
[[gnu::always_inline]] inline bool append_fast(ThreadLog* log, const Call& k) {
  if (!enter_log(log)) [[unlikely]]
    return false;
  encode_into(log, k);
  leave_log(log);
  return true;
}

// The calling allocation's stack id when recording stacks (--stack N), else 0. Call after taking
// the call's time stamp: the unwind is the recorder's cost, not the call's.
inline uint32_t call_stack() {
  return g_stack_depth ? capture_stack() : 0;
}

// Appends one event. Cost: two plain stores of `busy`, ~8 bytes of encoding, no atomic
// read-modify-write and no system call except when the 64 KiB buffer fills.
[[gnu::always_inline]] inline void record(Op op, uint64_t time, uint64_t a, uint64_t b, uint64_t c,
                                          const void* result, uint32_t duration = 0,
                                          uint32_t stack = 0) {
  const Call k{op, time, a, b, c, reinterpret_cast<uint64_t>(result), duration, stack};
  ThreadLog* log = my_log();
  if (!log) return;
  if (!enter_log(log)) [[unlikely]] {
    record_locked(log, k);
  } else {
    append(log, k);
    leave_log(log);
  }
  if (tl_exited) [[unlikely]]
    hand_back_late_log(log);
}

}  // namespace ak::trace::rec
