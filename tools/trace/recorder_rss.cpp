// The recorder's memory samples (recorder_log.hpp): RssAnon and VmRSS from /proc/self/statm about
// every kRssPeriodMs (8 ms apart at most), journalled in RSS blocks (codec.hpp), with
// the non-heap share of RssAnon (nonheap.hpp: data segments and stacks; see kNonheapEveryMs for
// how often), so a replay can be held against the heap memory the program really used. A program
// that allocates fills its logs, and the flush of a log takes the sample when one is due
// (sample_at_flush): no other thread runs. The recorder's own sampler thread samples only when
// no flush did, and sleeps longer while flushes sample for it. Nothing here runs on an
// allocation path but sample_at_flush, which a log flush calls once every 64 KiB of events.
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "trace/nonheap.hpp"
#include "trace/recorder_log.hpp"

namespace ak::trace::rec {

namespace {

// As often as the replay worker samples, so a short peak is seen alike on both sides: at 5 ms,
// `git log`'s recorded heap peak read 2.5% lower (7.69-7.76 MiB, against 7.90-7.93 at 2 and at
// 1 ms), which the replay, whose peak also takes the kernel's high-water mark, did not miss.
constexpr long kRssPeriodMs = 2;
constexpr uint64_t kRssPeriodNs = kRssPeriodMs * 1000000;
// A flush samples when the last sample is this old: before the sampler's next wake-up is due,
// so a program that flushes often takes every sample itself and the sampler sees it and sleeps.
constexpr uint64_t kFlushSampleNs = kRssPeriodNs * 3 / 4;
// The sampler's longest sleep while flushes take the samples: each of its wake-ups preempts a
// thread of a program that keeps both cores busy, and one holding its allocator's lock stalls
// the others (larson: 0.13x of its wall time for a sampler waking every 2 ms, against none).
// When flushes stop, the next sample comes at most kRssPeriodMs + this after the last.
constexpr long kSamplerMaxSleepMs = 6;
constexpr uint32_t kRssBatch = 500;  // samples per block: a second's worth
// Non-heap memory is measured by the sampler thread only (never by a flush: that would be
// 0.1-0.2 ms inside the program's malloc, 1-14 ms on kernels that only have smaps), at the first
// and last sample, every kNonheapMovingMs while what the mappings hold of it moves (a program
// starting up dirties its data segments within milliseconds), else every kNonheapEveryMs: the
// data segments move with loads, not with allocations or threads. The program's thread stacks
// (mincore) are measured with it but do not count as its moves (larson, which starts a thread every
// millisecond, read smaps every 4 ms when they did: 2.4% of the recorded run's time). Samples in
// between hold kNonheapUnmeasured and readers fill them in (fill_unmeasured).
constexpr uint64_t kNonheapEveryMs = 50;
constexpr uint64_t kNonheapMovingMs = 4;
constexpr uint64_t kMappedMoving = 16 * 1024;  // a change this large: measure again soon
constexpr size_t kMaxStacks = 1024;    // thread stacks measured; more threads: theirs count as heap
constexpr size_t kMaxLeftStacks = 64;  // exited threads' cached stacks; more count as heap

struct RssBuffer {
  SpinLock lock;
  uint32_t n = 0;
  uint64_t nonheap_at_ns = 0;  // when non-heap memory was last measured (0: never)
  uint64_t mapped = 0;         // what the mappings held of it then (thread stacks left out)
  bool mapped_moving = true;
  RssRecord samples[kRssBatch]{};
  AddressRange stacks[kMaxStacks]{};
  AddressRange left[kMaxLeftStacks]{};
};
constinit RssBuffer g_rss{};  // constinit: the constructor samples before dynamic initialisers run
constinit std::atomic<uint64_t> g_recorder_bytes{0};
constinit std::atomic<bool> g_sampler_running{false};
constinit std::atomic<uint64_t> g_last_sample_ns{0};  // CLOCK_MONOTONIC of the latest sample

// Reads a small /proc file into `buf` (NUL-terminated); false when it cannot.
bool read_proc(const char* path, char* buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  return true;
}

// Writes the buffered samples as one RSS block. Caller holds the buffer's lock.
void write_rss_locked() {
  if (g_rss.n == 0 || g_fd < 0) return;
  BlockHeader h{};
  std::memcpy(h.magic, kBlockMagic, 4);
  h.codec = kCodecRss | kTicksFlag;
  h.stored_len = h.raw_len = static_cast<uint32_t>(g_rss.n * sizeof(RssRecord));
  h.event_count = g_rss.n;
  h.crc = block_crc(h, g_rss.samples, h.stored_len);
  iovec v[2] = {{&h, sizeof h}, {g_rss.samples, h.stored_len}};
  int saved = errno;
  write_all(g_fd, v, 2);
  errno = saved;
  g_rss.n = 0;
}

// RssAnon and VmRSS of this instant, from /proc/self/statm (size resident shared text lib data
// dt, in pages; shared = RssFile + RssShmem); false when it cannot be read.
bool read_statm(uint64_t& anon, uint64_t& rss) {
  char buf[256];
  if (!read_proc("/proc/self/statm", buf, sizeof buf)) return false;
  char* p = buf;
  std::strtoull(p, &p, 10);
  const unsigned long long resident = std::strtoull(p, &p, 10);
  const unsigned long long shared = std::strtoull(p, &p, 10);
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  anon = (resident - (shared < resident ? shared : resident)) * page;
  rss = resident * page;
  return true;
}

// The stacks of the program's live threads (but the main thread's: [stack]). A slot is free when
// lo is 0; pthread_create's wrapper claims one for the thread it starts (lo 1, with the thread's
// function and argument), and the thread fills in its stack as it starts (start_registered).
struct StackSlot {
  std::atomic<uintptr_t> lo{0}, hi{0};
  void* (*fn)(void*) = nullptr;
  void* arg = nullptr;
};
constinit StackSlot g_thread_stacks[kMaxStacks]{};
constinit thread_local StackSlot* tl_stack_slot = nullptr;

// The stacks of exited threads, while glibc keeps them mapped for its next threads (a few pages
// of each stay resident): still not heap, as the replay's own thread stacks are not. Slots as
// above (fn and arg unused); a new thread on a cached stack takes it back as its own (fill_slot),
// and a measure that finds no stack mapping holding it frees it (glibc unmapped the stack).
constinit StackSlot g_left_stacks[kMaxLeftStacks]{};

// Claims a free slot of `slots`; null when every one is taken.
template <size_t N>
StackSlot* claim_slot(StackSlot (&slots)[N]) {
  for (StackSlot& s : slots) {
    uintptr_t free_slot = 0;
    if (s.lo.load(std::memory_order_relaxed) == 0 && s.lo.compare_exchange_strong(free_slot, 1))
      return &s;
  }
  return nullptr;
}

// The stacks `slots` hold (claimed and filled in), into `out`; `from[i]`, when given, is the
// slot of out[i]. Returns how many.
template <size_t N>
size_t held_stacks(StackSlot (&slots)[N], AddressRange* out, StackSlot** from = nullptr) {
  size_t n = 0;
  for (StackSlot& s : slots) {
    const uintptr_t lo = s.lo.load(std::memory_order_acquire),
                    hi = s.hi.load(std::memory_order_relaxed);
    if (lo > 1 && hi > lo) {
      if (from) from[n] = &s;
      out[n++] = {lo, hi};
    }
  }
  return n;
}

void leave_stack(uintptr_t lo, uintptr_t hi) {
  if (StackSlot* l = claim_slot(g_left_stacks)) {
    l->hi.store(hi, std::memory_order_relaxed);
    l->lo.store(lo, std::memory_order_release);
  }
}

void take_back_stack(uintptr_t lo, uintptr_t hi) {
  for (StackSlot& l : g_left_stacks) {
    uintptr_t llo = l.lo.load(std::memory_order_acquire);
    if (llo > 1 && llo < hi && l.hi.load(std::memory_order_relaxed) > lo)
      l.lo.compare_exchange_strong(llo, 0);
  }
}
pthread_key_t g_stack_key;  // its destructor leaves an exiting thread's stack and frees its slot
unsigned long long g_allocator_inode = 0;  // the program's allocator: its own memory is heap

void release_thread_stack(void* slot) {
  auto* s = static_cast<StackSlot*>(slot);
  const uintptr_t lo = s->lo.load(std::memory_order_relaxed);
  if (lo > 1) leave_stack(lo, s->hi.load(std::memory_order_relaxed));
  s->hi.store(0, std::memory_order_relaxed);
  s->lo.store(0, std::memory_order_release);
  tl_stack_slot = nullptr;
}

// Fills claimed slot `s` with the calling thread's stack and makes it the thread's; frees the slot
// and returns false when the stack is unknown.
bool fill_slot(StackSlot* s) {
  uintptr_t lo = 0, hi = 0;
  {
    Guard g;  // pthread_getattr_np allocates: those calls are not the program's
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* addr = nullptr;
      size_t size = 0;
      if (pthread_attr_getstack(&attr, &addr, &size) == 0)
        lo = reinterpret_cast<uintptr_t>(addr), hi = lo + size;
      pthread_attr_destroy(&attr);
    }
  }
  if (lo <= 1) {
    release_thread_stack(s);  // its stack unknown: the slot is free again
    return false;
  }
  take_back_stack(lo, hi);  // a cached stack glibc hands on: this thread's now
  s->hi.store(hi, std::memory_order_relaxed);
  s->lo.store(lo, std::memory_order_release);
  tl_stack_slot = s;
  return true;
}

// Non-heap bytes of this instant, with the registered thread stacks. Caller holds the buffer's
// lock.
uint64_t measure_nonheap_locked(uint64_t now) {
  const size_t n = held_stacks(g_thread_stacks, g_rss.stacks);
  StackSlot* from[kMaxLeftStacks];
  const size_t n_left = held_stacks(g_left_stacks, g_rss.left, from);
  bool seen[kMaxLeftStacks] = {};
  const uint64_t was = g_rss.mapped;
  g_rss.mapped = nonheap_bytes(nullptr, 0, g_allocator_inode, g_rss.left, n_left, seen);
  for (size_t i = 0; i < n_left; ++i) {
    uintptr_t lo = g_rss.left[i].lo;
    if (!seen[i]) from[i]->lo.compare_exchange_strong(lo, 0);  // unmapped: forget it
  }
  g_rss.mapped_moving = g_rss.mapped > was + kMappedMoving || was > g_rss.mapped + kMappedMoving;
  g_rss.nonheap_at_ns = now;
  return g_rss.mapped + stack_bytes(g_rss.stacks, n);
}

// Whether non-heap memory is due for a measure at `now`. Caller holds the buffer's lock.
bool nonheap_due_locked(uint64_t now) {
  const uint64_t every = (g_rss.mapped_moving ? kNonheapMovingMs : kNonheapEveryMs) * 1000000;
  return g_rss.nonheap_at_ns == 0 || now - g_rss.nonheap_at_ns >= every;
}

// Appends one sample of this instant (`now`, CLOCK_MONOTONIC), measuring non-heap memory when
// `nonheap` and all of the recorder's own when `last` (the sample at exit), and lets calls stamp
// again (sampled_stamp). Caller holds the buffer's lock.
void sample_locked(uint64_t now, bool nonheap, bool last = false) {
  const uint64_t measured = nonheap ? measure_nonheap_locked(now) : kNonheapUnmeasured;
  g_last_sample_ns.store(now, std::memory_order_relaxed);
  g_coarse_tick.fetch_add(1, std::memory_order_relaxed);
  uint64_t anon, rss;
  if (!read_statm(anon, rss)) return;
  if (g_rss.n == kRssBatch) write_rss_locked();
  const uint64_t recorder =
      g_recorder_bytes.load(std::memory_order_relaxed) + resident_log_bytes(last);
  g_rss.samples[g_rss.n++] = {__rdtsc(), anon, rss, recorder, measured};
}

// Live threads of the process, from /proc/self/stat: its 20th field, less the main thread when
// that is a zombie (it called pthread_exit: it stays counted until the process ends); 0 when
// unknown.
long thread_count() {
  char buf[1024];
  if (!read_proc("/proc/self/stat", buf, sizeof buf)) return 0;
  const char* p = std::strrchr(buf, ')');  // the command name may hold spaces
  if (!p || p[1] != ' ') return 0;
  const bool main_gone = p[2] == 'Z';  // the 3rd field: the main thread's state
  for (int field = 2; p && field < 20; ++field) p = std::strchr(p + 1, ' ');
  return p ? std::strtol(p + 1, nullptr, 10) - (main_gone ? 1 : 0) : 0;
}

// Whether a thread started through pthread_create's wrapper still runs (its slot is claimed);
// the calling thread's own slot (the sampler's) aside.
bool registered_thread_lives() {
  for (const StackSlot& s : g_thread_stacks)
    if (&s != tl_stack_slot && s.lo.load(std::memory_order_relaxed) != 0) return true;
  return false;
}

// Whether the process leaves a core idle, from its CPU time over the last
// kCpuShareWindowNs: a hand-off then wakes the writer, whose work runs beside the program's.
// A program that keeps every core busy (larson: two threads on two cores) is not woken for: a
// wake-up would preempt one of its threads to do work that thread can do itself. Its threads
// write their blocks once their other buffer is still queued, as before the writer existed; the
// writer still writes what it finds when it wakes to sample.
constexpr uint64_t kCpuShareWindowNs = 20 * 1000000;
struct CpuShare {
  uint64_t since_ns = 0, cpu_ns = 0;
  long cores = 0;
  void update(uint64_t now) {
    if (cores == 0) {
      cpu_set_t set;
      cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    }
    if (now - since_ns < kCpuShareWindowNs) return;
    timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return;
    const uint64_t cpu = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
    if (since_ns != 0) {
      // Busy cores, in hundredths: idle when at least half a core is left.
      const uint64_t busy = (cpu - cpu_ns) * 100 / (now - since_ns);
      writer_wakes(busy + 50 <= static_cast<uint64_t>(cores) * 100);
    }
    since_ns = now, cpu_ns = cpu;
  }
};

// The sampler thread, which is also the writer of the logs handed off to it (recorder_writer.cpp):
// a hand-off wakes it early.
void* sampler(void*) {
  ++tl_busy;  // nothing this thread does is the program's
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);  // the program's signals go to its own threads
  // Its stack (zstd's, too, since it writes the logs: 24 KiB resident) is the recorder's memory,
  // not the heap: measured with the program's thread stacks as non-heap.
  if (StackSlot* own = claim_slot(g_thread_stacks)) fill_slot(own);
  writer_started();
  long sleep_ms = kRssPeriodMs;
  uint64_t mine = g_last_sample_ns.load(std::memory_order_relaxed);  // this thread's latest
  CpuShare share;
  for (uint64_t woke = mono_ns();;) {
    // Sleeps until the next sample is due, unless a hand-off comes first.
    const long slept_ms = static_cast<long>((mono_ns() - woke) / 1000000);
    if (slept_ms < sleep_ms) writer_wait(sleep_ms - slept_ms);
    write_handed_off();
    const uint64_t now = mono_ns();
    if (now - woke < static_cast<uint64_t>(sleep_ms) * 1000000) continue;  // woken to write
    woke = now;
    share.update(now);
    // The latest sample is not this thread's: a flush took it, the program allocates, and its
    // flushes sample for it.
    const uint64_t last = g_last_sample_ns.load(std::memory_order_relaxed);
    const bool flushes_sample = last != mine;
    g_rss.lock.lock();
    const bool nonheap = nonheap_due_locked(now);
    if (now - last >= kRssPeriodNs || nonheap) sample_locked(mine = now, nonheap);
    g_rss.lock.unlock();
    sleep_ms = flushes_sample ? std::min(2 * sleep_ms, kSamplerMaxSleepMs) : kRssPeriodMs;
    // The program's last thread is gone (its main thread called pthread_exit): leave, so the
    // process ends as it would have. A registered thread that lives is one that is not gone, and
    // costs no read of /proc.
    if (!registered_thread_lives() && thread_count() == 1) {
      writer_stopping();
      g_rss.lock.lock();
      write_rss_locked();
      g_rss.lock.unlock();
      return nullptr;
    }
  }
}

}  // namespace

void setup_memory_samples(const void* allocator_symbol) {
  pthread_key_create(&g_stack_key, release_thread_stack);
  g_allocator_inode = object_inode(allocator_symbol);
}

// A registered thread's first function: notes its stack in the slot its creator claimed, then
// runs the program's function.
void* start_registered(void* slot) {
  auto* s = static_cast<StackSlot*>(slot);
  void* (*fn)(void*) = s->fn;
  void* arg = s->arg;
  if (fill_slot(s)) pthread_setspecific(g_stack_key, s);
  return fn(arg);
}

int create_registered_thread(CreateThread create, pthread_t* thread, const pthread_attr_t* attr,
                             void* (*fn)(void*), void* arg) {
  if (StackSlot* s = claim_slot(g_thread_stacks)) {
    s->fn = fn;
    s->arg = arg;
    const int rc = create(thread, attr, start_registered, s);
    if (rc != 0) s->lo.store(0, std::memory_order_release);
    return rc;
  }
  return create(thread, attr, fn, arg);  // every slot taken: this thread's stack counts as heap
}

bool rss_sampler_running() {
  return g_sampler_running.load(std::memory_order_relaxed);
}

uint64_t anon_bytes_now() {
  uint64_t anon = 0, rss = 0;
  read_statm(anon, rss);
  return anon;
}

void count_recorder_bytes(size_t bytes) {
  g_recorder_bytes.fetch_add(bytes, std::memory_order_relaxed);
}

void uncount_recorder_bytes(size_t bytes) {
  g_recorder_bytes.fetch_sub(bytes, std::memory_order_relaxed);
}

void start_rss_sampler() {
  if (g_fd < 0 || g_sampler_running.exchange(true)) return;
  g_rss.lock.lock();
  sample_locked(mono_ns(),
                true);  // the first: the process before the program's first allocation
  g_rss.lock.unlock();
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);  // zstd runs on it
  pthread_t t;
  ++tl_busy;
  if (pthread_create(&t, &attr, sampler, nullptr) != 0) g_sampler_running.store(false);
  --tl_busy;
  pthread_attr_destroy(&attr);
}

void rss_after_fork_child() {
  // The sampler did not survive the fork; the parent's samples are the parent's to write.
  g_rss.lock.unlock();
  g_rss.n = 0;
  g_rss.nonheap_at_ns = 0;
  g_last_sample_ns.store(0, std::memory_order_relaxed);
  for (StackSlot& s : g_thread_stacks)  // only the forking thread lives on in the child
    if (&s != tl_stack_slot) s.hi.store(0), s.lo.store(0);
  g_rss.mapped_moving = true;
  g_sampler_running.store(false);
}

void sample_at_flush() {
  if (!g_sampler_running.load(std::memory_order_relaxed)) return;
  const uint64_t now = mono_ns();
  if (now - g_last_sample_ns.load(std::memory_order_relaxed) < kFlushSampleNs ||
      !g_rss.lock.try_lock())
    return;
  const int saved = errno;
  sample_locked(now, false);
  g_rss.lock.unlock();
  errno = saved;
}

void flush_rss(bool final_sample) {
  if (g_fd < 0) return;
  if (final_sample) {
    g_rss.lock.lock();
    sample_locked(mono_ns(), true, true);
  } else if (!g_rss.lock.try_lock()) {
    return;  // a crash handler never waits; the sampler holds what it has
  }
  write_rss_locked();
  g_rss.lock.unlock();
}

}  // namespace ak::trace::rec
