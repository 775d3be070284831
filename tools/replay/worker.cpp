// allockit-replay: replays one plan against whatever malloc the process has (LD_PRELOAD picks
// it) and writes raw samples. Its own tables (plan, slots, samples, RSS log) come from mmap and
// are populated before the replay starts, so resident memory growth is the allocator's.
// Usage: allockit-replay PLAN OUTDIR SPEED TOUCH   (SPEED 0 = max; TOUCH none|page|full|auto)
// A plan with routes (`allockit advise`) sends the routed blocks to pools and arenas of the
// library ALLOCKIT_REPLAY_ROUTES names (liballockit-prefixed), one instance per thread, created
// and destroyed outside the timed calls. ALLOCKIT_REPLAY_CHECK=1 counts allocations and frees,
// and stops at an arena reset that would free a live block.
// Timing: serialised rdtsc (rdtsc; lfence ... rdtscp; lfence) around each call, calibrated to ns
// against CLOCK_MONOTONIC; touching the memory happens outside that window.
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "replay/plan.hpp"
#include "replay/routes.hpp"
#include "trace/nonheap.hpp"

using namespace ak::replay;
using ak::trace::Op;

namespace {

[[noreturn]] void die(const char* what) {
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, "allockit-replay: %s%s%s\n", what, errno ? ": " : "",
                        errno ? std::strerror(errno) : "");
  (void)!write(2, buf, static_cast<size_t>(n));
  _exit(2);
}

void* map_zero(size_t bytes) {
  if (bytes == 0) bytes = 1;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                 -1, 0);
  if (p == MAP_FAILED) die("cannot map replay tables");
  return p;
}

// Start stamp: rdtsc then lfence, so the call cannot begin before the stamp. (A leading lfence
// would also wait for the previous op's bookkeeping stores; that costs ~8 ns an op and changes
// no percentile above the timer floor.)
inline uint64_t tsc_begin() {
  uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
}
inline uint64_t tsc_end() {
  unsigned aux;
  uint64_t t = __rdtscp(&aux);
  _mm_lfence();
  return t;
}
uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Threads this process starts (the replay threads but the lead, which replays on the main
// thread's [stack], the launcher and the sampler) run on stacks mapped here, so the non-heap
// share of RssAnon (trace/nonheap.hpp) takes them out, as the recorder takes out the program's:
// both memory curves are heap only.
constexpr size_t kThreadStackBytes = 2u << 20;
struct Stacks {
  ak::trace::AddressRange* ranges;
  std::atomic<size_t> n;
  size_t cap;
};
Stacks g_stacks;

void start_thread(pthread_t* tid, void* (*fn)(void*), void* arg) {
  const size_t guard = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* m = mmap(nullptr, guard + kThreadStackBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (m == MAP_FAILED || mprotect(m, guard, PROT_NONE) != 0) die("cannot map a thread stack");
  auto* lo = static_cast<char*>(m) + guard;
  const size_t i = g_stacks.n.load(std::memory_order_relaxed);
  if (i == g_stacks.cap) die("too many threads");
  g_stacks.ranges[i] = {reinterpret_cast<uintptr_t>(lo),
                        reinterpret_cast<uintptr_t>(lo + kThreadStackBytes)};
  g_stacks.n.store(i + 1, std::memory_order_release);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstack(&attr, lo, kThreadStackBytes);
  errno = pthread_create(tid, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  if (errno != 0) die("cannot start a thread");
}

// The allocator under test (the object that defines the malloc this process calls): its own
// data and .bss are its metadata, so heap.
unsigned long long g_allocator_inode = 0;

uint64_t nonheap() {
  return ak::trace::nonheap_bytes(g_stacks.ranges, g_stacks.n.load(std::memory_order_acquire),
                                  g_allocator_inode);
}

// Fields of /proc/self/status in bytes (0 when missing), read without allocating.
struct Status {
  uint64_t rss_anon = 0, rss_file = 0, rss_shmem = 0, vm_hwm = 0;
};
Status read_status() {
  Status st;
  char buf[4096];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return st;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return st;
  buf[n] = 0;
  auto field = [&](const char* name) {
    const char* p = std::strstr(buf, name);
    return p ? std::strtoull(p + std::strlen(name), nullptr, 10) * 1024 : 0;
  };
  st.rss_anon = field("RssAnon:");
  st.rss_file = field("RssFile:");
  st.rss_shmem = field("RssShmem:");
  st.vm_hwm = field("VmHWM:");
  return st;
}

uint64_t rss_anon() {
  return read_status().rss_anon;
}

// Resets the kernel's peak RSS (VmHWM) to the current RSS; false when it cannot.
bool reset_peak_rss() {
  int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, "5", 1) == 1;
  close(fd);
  return ok;
}

thread_local ThreadRoutes tl_routes;

struct Shared {
  const PlanHeader* plan;
  const uint64_t* counts;
  Routes routes;
  const PlanOp* ops;
  std::atomic<uintptr_t>* slots;
  uint32_t* lat;          // ticks, later ns
  uint32_t* t_rel;        // ticks >> 10, later us
  uint64_t* touch_ticks;  // per thread
  double speed;
  int touch;  // 0 none, 1 page, 2 full, 3 auto (page, but calloc'd blocks are left alone)
  uint64_t tsc0, mono0;
  double ns_per_tick;
  std::atomic<int> go{0};
  std::atomic<uint64_t>* progress;
  std::atomic<int> sampling{1};
};
Shared g;

// One per replay thread, a cache line each: `at` is written every 256 ops.
struct alignas(64) ThreadArg {
  uint32_t index;
  uint64_t first;              // index of the thread's first op
  std::atomic<uint64_t> at;    // ops done (every 256th), for the launcher's watchdog
  std::atomic<bool> done;      // the lead thread (run by main) has replayed all its ops
  bool joined;                 // the launcher has joined it (launcher and then main only)
  uint64_t first_ns, last_ns;  // recorded times of its first and last op
};

// Writes block `p` (`n` bytes) as --touch says: every byte (full), or one byte in each of its
// first `pages` pages, counted from the page holding its start (page and auto: all of them, or
// as many as the journal says were resident when the program freed the block).
inline void touch(void* p, uint64_t n, uint64_t pages) {
  if (!p || n == 0) return;
  if (g.touch == 2) {
    std::memset(p, 0x5a, n);
    return;
  }
  auto* c = static_cast<volatile char*>(p);
  const uint64_t head = reinterpret_cast<uintptr_t>(p) & 4095;
  for (uint64_t k = 0; k < pages; ++k) {
    const uint64_t off = k == 0 ? 0 : k * 4096 - head;
    if (off >= n) break;
    c[off] = 1;
  }
}

// Waits until another thread fills `slot`. Spins (yielding every 256 spins) for kSpinNs, then
// sleeps kNapNs at a time: a thread that waits for most of the replay (larson's main thread,
// whose frees at the end wait for its workers' last blocks) yielding on one of two cores took a
// third of the CPU from the threads it waited for, and their timed calls were preempted for it
// (larson's replay: 0.83 s against the program's 0.17 s).
inline void* wait_slot(uint32_t slot) {
  constexpr uint64_t kSpinNs = 100000, kNapNs = 50000;
  uintptr_t v;
  uint64_t spins = 0;
  uint64_t start = 0;
  while ((v = g.slots[slot].load(std::memory_order_acquire)) == 0) {
    _mm_pause();
    if (++spins % 256 == 0) {  // the filling thread may be descheduled: yield soon
      const uint64_t now = mono_ns();
      if (!start) start = now;
      if (now - start > 30ull * 1000000000ull)
        die("stuck waiting for a block allocated by another thread");
      if (now - start < kSpinNs) {
        sched_yield();
      } else {
        timespec ts{0, static_cast<long>(kNapNs)};
        nanosleep(&ts, nullptr);
      }
    }
  }
  return v == 1 ? nullptr : reinterpret_cast<void*>(v);
}

// After a call: its latency and start, the touch, the slot, progress.
template <bool kTouch>
[[gnu::always_inline]] inline void finish_op(ThreadArg* arg, const PlanOp& op, uint64_t i,
                                             uint64_t t0, uint64_t t1, void* p, uint32_t* lat,
                                             uint32_t* trel, uint64_t& touch_ticks) {
  uint64_t d = t1 - t0;
  lat[i] = d > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(d);
  trel[i] = static_cast<uint32_t>((t0 - g.tsc0) >> 10);
  if (g.routes.check && !g.routes.check_op(tl_routes, op, p)) [[unlikely]]
    die("an arena reset would free blocks still live: the routing breaks the journal");
  if (op.slot != kNone) {
    // `auto` leaves calloc'd blocks as the allocator left them: their pages are zero already,
    // and a program that callocs a table often writes few of them (on `git log`, touching them
    // read 1.15x the recorded heap; leaving them, 1.06x).
    const bool recorded = g.touch == 3 && op.pages != 0;  // the journal has its pages
    if (kTouch && p && (recorded || !(g.touch == 3 && Op(op.kind) == Op::kCalloc))) {
      uint64_t a = tsc_begin();
      touch(p, op_bytes(op), recorded ? op.pages - 1 : UINT64_MAX);
      touch_ticks += tsc_end() - a;
    }
    g.slots[op.slot].store(p ? reinterpret_cast<uintptr_t>(p) : 1, std::memory_order_release);
  } else if (p) {
    free(p);  // realloc(p, 0) that returned a block here though it freed when recorded
  }
  if ((i & 0xff) == 0xff) [[unlikely]] {
    arg->at.store(i + 1, std::memory_order_relaxed);
    if ((i & 0xffff) == 0xffff) g.progress->fetch_add(0x10000, std::memory_order_relaxed);
  }
}

// The replay loop, compiled once per mode so the common one (--speed max, --touch none) carries
// no pacing or touching branches.
template <bool kPaced, bool kTouch>
void replay_ops(ThreadArg* arg) {
  const PlanOp* ops = g.ops + arg->first;
  uint32_t* lat = g.lat + arg->first;
  uint32_t* trel = g.t_rel + arg->first;
  uint64_t n = g.counts[arg->index];
  uint64_t touch_ticks = 0;
  while (!g.go.load(std::memory_order_acquire)) _mm_pause();
  for (uint64_t i = 0; i < n; ++i) {
    const PlanOp& op = ops[i];
    // The slot a few ops ahead will free is often cold: start loading it now.
    if (i + 8 < n && ops[i + 8].old_slot != kNone)
      __builtin_prefetch(&g.slots[ops[i + 8].old_slot]);
    // Paced by the TSC, not a clock_gettime per op (larson's replay: 0.75-0.95 -> 0.61-0.78 s).
    if (kPaced) {
      const uint64_t due =
          g.tsc0 + static_cast<uint64_t>(static_cast<double>(op.time_ns) / g.speed / g.ns_per_tick);
      for (uint64_t now = __rdtsc(); now < due; now = __rdtsc()) {
        const double ahead_ns = static_cast<double>(due - now) * g.ns_per_tick;
        if (ahead_ns > 2e6) {
          timespec ts{0, static_cast<long>(ahead_ns - 1e6)};
          nanosleep(&ts, nullptr);
        }
      }
    }
    void* old = nullptr;
    if (op.old_slot != kNone) {
      old = (op.flags & kWaitOld)
                ? wait_slot(op.old_slot)
                : reinterpret_cast<void*>(g.slots[op.old_slot].load(std::memory_order_relaxed));
      if (reinterpret_cast<uintptr_t>(old) == 1) old = nullptr;
    }
    void* p = nullptr;
    if (op.flags & kRouted) [[unlikely]] {
      void* inst = g.routes.instance(tl_routes, op.route);
      if (!inst) die("cannot create a routed pool or arena");
      uint64_t t0 = tsc_begin();
      p = g.routes.call(op, old, inst);
      uint64_t t1 = tsc_end();
      finish_op<kTouch>(arg, op, i, t0, t1, p, lat, trel, touch_ticks);
      continue;
    }
    uint64_t t0 = tsc_begin();
    switch (static_cast<Op>(op.kind)) {
      case Op::kMalloc:
        p = malloc(op.size);
        break;
      case Op::kCalloc:
        p = calloc(op.size, op.arg);
        break;
      case Op::kRealloc:
        p = realloc(old, op.size);
        break;
      case Op::kFree:
        free(old);
        break;
      case Op::kPosixMemalign:
        if (posix_memalign(&p, op.arg, op.size) != 0) p = nullptr;
        break;
      case Op::kAlignedAlloc:
        p = aligned_alloc(op.arg, op.size);
        break;
      case Op::kMemalign:
        p = memalign(op.arg, op.size);
        break;
      case Op::kValloc:
        p = valloc(op.size);
        break;
      case Op::kPvalloc:
        p = pvalloc(op.size);
        break;
      case Op::kReallocarray:
        p = reallocarray(old, op.size, op.arg);
        break;
    }
    uint64_t t1 = tsc_end();
    finish_op<kTouch>(arg, op, i, t0, t1, p, lat, trel, touch_ticks);
  }
  g.progress->fetch_add(n & 0xffff, std::memory_order_relaxed);
  g.touch_ticks[arg->index] = touch_ticks;
  g.routes.destroy(tl_routes);  // untimed
}

void* replay_thread(void* raw) {
  auto* arg = static_cast<ThreadArg*>(raw);
  bool paced = g.speed > 0, touching = g.touch != 0;
  if (paced)
    touching ? replay_ops<true, true>(arg) : replay_ops<true, false>(arg);
  else
    touching ? replay_ops<false, true>(arg) : replay_ops<false, false>(arg);
  return nullptr;
}

// Starts the replay threads in the order their recorded threads first called, each only once
// every thread that had ended before it began has ended here too: threads that never overlapped
// in the program never overlap in the replay (a program that ran its threads one after another
// had one glibc arena or thread cache at a time, not one per journal thread). A thread kept
// waiting while no launched thread replays anything for 50 ms starts anyway (a journal whose
// times disagree with its cross-thread order). The lead thread (the first to call: the
// program's main thread) is not started here: the process's main thread replays it.
struct Launch {
  ThreadArg* args;
  pthread_t* tids;
  uint32_t nt, lead;  // lead: nt when no thread has ops
};

void* launch_in_order(void* raw) {
  const Launch& l = *static_cast<const Launch*>(raw);
  ThreadArg* args = l.args;
  const uint32_t nt = l.nt;
  // From mmap, as every table here: the allocator under test sees only the replayed calls.
  auto* order = static_cast<uint32_t*>(map_zero(nt * 4 + 4));
  auto* launched = static_cast<uint32_t*>(map_zero(nt * 4 + 4));
  uint32_t n_launched = 0;
  for (uint32_t t = 0; t < nt; ++t) order[t] = t;
  std::sort(order, order + nt, [&](uint32_t a, uint32_t b) {
    return args[a].first_ns != args[b].first_ns ? args[a].first_ns < args[b].first_ns : a < b;
  });
  // Joined, not just done: glibc hands a thread's arena on only as the thread exits. The lead
  // keeps the main thread's arena, so its end is enough.
  auto ended = [&](uint32_t j) {
    if (j == l.lead) return args[j].done.load(std::memory_order_acquire);
    if (pthread_tryjoin_np(l.tids[j], nullptr) != 0) return false;
    args[j].joined = true;
    return true;
  };
  if (l.lead < nt) launched[n_launched++] = l.lead;
  for (uint32_t i = 0; i < nt; ++i) {
    const uint32_t k = order[i];
    if (k == l.lead) continue;
    uint64_t seen = UINT64_MAX, still_since = mono_ns();
    for (;;) {
      bool waiting = false;
      uint64_t progress = 0;
      for (uint32_t m = 0; m < n_launched; ++m) {
        const uint32_t j = launched[m];
        progress += args[j].at.load(std::memory_order_relaxed);
        if (g.counts[k] > 0 && args[j].last_ns < args[k].first_ns && !args[j].joined && !ended(j))
          waiting = true;
      }
      if (!waiting) break;
      const uint64_t now = mono_ns();
      if (progress != seen) seen = progress, still_since = now;
      if (now - still_since > 50000000) break;
      timespec ts{0, 20000};
      nanosleep(&ts, nullptr);
    }
    start_thread(&l.tids[k], replay_thread, &args[k]);
    launched[n_launched++] = k;
  }
  return nullptr;
}

// RSS sampler: every 2 ms, RssAnon and, every kNonheapEvery samples (50 ms, as the recorder
// measures), its non-heap share; written out after the replay (rss_finish) as "ms,bytes" of heap:
// RssAnon less non-heap, above the same taken before the replay (the first sample).
constexpr uint32_t kNonheapEvery = 25;
struct RssPoint {
  uint64_t mono_ns, anon, nonheap;  // nonheap: kNonheapUnmeasured between measures
};
struct RssLog {
  RssPoint* points;
  size_t n, cap;
  uint32_t since_nonheap;
  uint64_t baseline, peak, final;  // heap bytes, set by rss_finish
  bool hwm_reset;                  // VmHWM was reset at the baseline
};
RssLog g_rss;

void rss_sample(bool full = false) {
  if (g_rss.n == g_rss.cap) return;
  uint64_t nh = ak::trace::kNonheapUnmeasured;
  if (full || ++g_rss.since_nonheap >= kNonheapEvery) {
    nh = nonheap();
    g_rss.since_nonheap = 0;
  }
  g_rss.points[g_rss.n++] = {mono_ns(), rss_anon(), nh};
}

// Fills in non-heap between measures, sets baseline, peak and final, and formats rss.csv into a
// mapped buffer (the allocator under test never sees the worker's own memory). Returns its length.
size_t rss_finish(char*& text) {
  RssPoint* pts = g_rss.points;
  const size_t n = g_rss.n;
  ak::trace::fill_unmeasured(n, [&](size_t i) -> uint64_t& { return pts[i].nonheap; });
  auto heap = [&](size_t i) {
    return pts[i].anon > pts[i].nonheap ? pts[i].anon - pts[i].nonheap : 0;
  };
  g_rss.baseline = n ? heap(0) : 0;
  // A peak between two samples (a replay at full speed runs a program's lifetime in
  // milliseconds) is still caught by the kernel's high-water mark, reset at the baseline: its
  // anonymous part (file and shared pages change little once the plan is mapped) less the
  // largest non-heap measure.
  if (g_rss.hwm_reset && n) {
    const Status st = read_status();
    uint64_t nh = 0;
    for (size_t i = 0; i < n; ++i) nh = pts[i].nonheap > nh ? pts[i].nonheap : nh;
    const uint64_t other = st.rss_file + st.rss_shmem + nh + g_rss.baseline;
    if (st.vm_hwm > other) g_rss.peak = st.vm_hwm - other;
  }
  text = static_cast<char*>(map_zero(n * 48 + 1));
  size_t len = 0;
  for (size_t i = 1; i < n; ++i) {
    const uint64_t h = heap(i), v = h > g_rss.baseline ? h - g_rss.baseline : 0;
    g_rss.peak = v > g_rss.peak ? v : g_rss.peak;
    g_rss.final = v;
    const double ms =
        pts[i].mono_ns > g.mono0 ? static_cast<double>(pts[i].mono_ns - g.mono0) * 1e-6 : 0;
    len += static_cast<size_t>(
        std::snprintf(text + len, 48, "%.3f,%llu\n", ms, static_cast<unsigned long long>(v)));
  }
  return len;
}

void* sampler(void*) {
  while (g.sampling.load(std::memory_order_acquire)) {
    rss_sample();
    timespec ts{0, 2000000};
    nanosleep(&ts, nullptr);
  }
  return nullptr;
}

void write_file(const char* dir, const char* name, const void* data, size_t n) {
  char path[4096];
  std::snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) die("cannot create a result file");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) die("cannot write a result file");
    p += w;
    n -= static_cast<size_t>(w);
  }
  close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: allockit-replay PLAN OUTDIR SPEED none|page|full|auto\n");
    return 2;
  }
  const char* dir = argv[2];
  g.speed = std::strtod(argv[3], nullptr);
  g.touch = std::strcmp(argv[4], "page") == 0   ? 1
            : std::strcmp(argv[4], "full") == 0 ? 2
            : std::strcmp(argv[4], "auto") == 0 ? 3
                                                : 0;

  int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
  if (fd < 0) die("cannot open the plan");
  struct stat st;
  fstat(fd, &st);
  if (st.st_size < static_cast<off_t>(sizeof(PlanHeader))) die("plan too short");
  void* m =
      mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (m == MAP_FAILED) die("cannot map the plan");
  close(fd);
  g.plan = static_cast<const PlanHeader*>(m);
  if (std::memcmp(g.plan->magic, kPlanMagic, 8) != 0) die("not a replay plan");
  uint32_t nt = g.plan->threads;
  g.counts = reinterpret_cast<const uint64_t*>(g.plan + 1);
  g.routes.table = reinterpret_cast<const PlanRoute*>(g.counts + nt);
  const uint32_t nroutes = g.routes.count = g.plan->routes;
  if (nroutes > kMaxRoutes) die("plan has too many routes");
  g.ops = reinterpret_cast<const PlanOp*>(g.routes.table + nroutes);
  uint64_t nops = g.plan->ops;
  if (sizeof(PlanHeader) + nt * 8 + nroutes * sizeof(PlanRoute) + nops * sizeof(PlanOp) !=
      static_cast<uint64_t>(st.st_size))
    die("plan size does not match its header");
  for (uint64_t i = 0; i < nops; ++i)
    if ((g.ops[i].flags & kRouted) && (g.ops[i].route == 0 || g.ops[i].route > nroutes))
      die("plan op names a route it does not have");
  if (nroutes)
    if (const char* err = g.routes.load(getenv("ALLOCKIT_REPLAY_ROUTES"))) die(err);
  const char* check = getenv("ALLOCKIT_REPLAY_CHECK");
  g.routes.check = check && check[0] == '1';

  g.slots = static_cast<std::atomic<uintptr_t>*>(map_zero(g.plan->slots * sizeof(uintptr_t)));
  g.lat = static_cast<uint32_t*>(map_zero(nops * 4));
  g.t_rel = static_cast<uint32_t*>(map_zero(nops * 4));
  g.touch_ticks = static_cast<uint64_t*>(map_zero(nt * 8 + 8));
  auto* args = static_cast<ThreadArg*>(map_zero(nt * sizeof(ThreadArg) + 8));
  auto* tids = static_cast<pthread_t*>(map_zero(nt * sizeof(pthread_t) + 8));
  g_allocator_inode = ak::trace::object_inode(reinterpret_cast<const void*>(&malloc));
  g_stacks.cap = nt + 2;  // the replay threads but the lead, the launcher, the sampler
  g_stacks.ranges = static_cast<ak::trace::AddressRange*>(
      map_zero(g_stacks.cap * sizeof(ak::trace::AddressRange)));
  g_rss.cap = 1u << 20;  // 35 minutes of samples
  g_rss.points = static_cast<RssPoint*>(map_zero(g_rss.cap * sizeof(RssPoint)));
  char progress_path[4096];
  std::snprintf(progress_path, sizeof progress_path, "%s/.progress", dir);
  int pfd = open(progress_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (pfd < 0 || ftruncate(pfd, 8) != 0) die("cannot create the progress file");
  g.progress = static_cast<std::atomic<uint64_t>*>(
      mmap(nullptr, 8, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0));
  if (reinterpret_cast<void*>(g.progress) == MAP_FAILED) die("cannot map the progress file");
  g.progress->store(0);

  // Calibrate the TSC against CLOCK_MONOTONIC over 50 ms, then measure the timer's own floor.
  uint64_t c0 = tsc_begin(), m0 = mono_ns();
  while (mono_ns() - m0 < 50000000) {
  }
  uint64_t c1 = tsc_end(), m1 = mono_ns();
  g.ns_per_tick = static_cast<double>(m1 - m0) / static_cast<double>(c1 - c0);
  uint64_t floor_min = UINT64_MAX, floor_sum = 0;
  constexpr int kFloorRuns = 10000;
  for (int i = 0; i < kFloorRuns; ++i) {
    uint64_t a = tsc_begin();
    uint64_t b = tsc_end();
    floor_min = b - a < floor_min ? b - a : floor_min;
    floor_sum += b - a;
  }

  pthread_t sampler_tid;
  uint64_t first = 0;
  for (uint32_t t = 0; t < nt; ++t) {
    args[t].index = t;
    args[t].first = first;
    if (g.counts[t] > 0) {
      args[t].first_ns = g.ops[first].time_ns;
      args[t].last_ns = g.ops[first + g.counts[t] - 1].time_ns;
    }
    first += g.counts[t];
  }
  // Benchmark allocators may want to know when the timed part starts (bench/trace/null_malloc.c).
  if (auto begin = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "allockit_replay_begin")))
    begin();
  rss_sample(true);  // the baseline
  g_rss.hwm_reset = reset_peak_rss();
  g.mono0 = mono_ns();
  g.tsc0 = tsc_begin();
  start_thread(&sampler_tid, sampler, nullptr);
  g.go.store(1, std::memory_order_release);
  // The lead thread replays on the process's main thread, as the program ran it: glibc serves
  // the main thread from its brk arena and every other thread from an mmap'd one. With the lead
  // on a thread of its own, larson recordings (the main thread allocates the slots its workers
  // then replace) replayed at 0.85-0.95x of their recorded heap, 1.05-1.09x with it on main.
  Launch launch{args, tids, nt, nt};
  for (uint32_t t = 0; t < nt; ++t)
    if (g.counts[t] > 0 && (launch.lead == nt || args[t].first_ns < args[launch.lead].first_ns))
      launch.lead = t;
  pthread_t launcher_tid;
  start_thread(&launcher_tid, launch_in_order, &launch);
  if (launch.lead < nt) {
    replay_thread(&args[launch.lead]);
    args[launch.lead].done.store(true, std::memory_order_release);
  }
  pthread_join(launcher_tid, nullptr);  // after it, every thread but the lead has started
  for (uint32_t t = 0; t < nt; ++t)
    if (t != launch.lead && !args[t].joined) pthread_join(tids[t], nullptr);
  uint64_t wall_ns = mono_ns() - g.mono0;
  g.sampling.store(0, std::memory_order_release);
  pthread_join(sampler_tid, nullptr);
  rss_sample(true);
  char* rss_text = nullptr;
  const size_t rss_len = rss_finish(rss_text);

  // Convert ticks to ns and us in place, then write the columns.
  uint64_t touch_ticks = 0;
  for (uint32_t t = 0; t < nt; ++t) touch_ticks += g.touch_ticks[t];
  double us_per_unit = g.ns_per_tick * 1024.0 / 1000.0;
  for (uint64_t i = 0; i < nops; ++i) {
    double ns = static_cast<double>(g.lat[i]) * g.ns_per_tick;
    g.lat[i] = ns >= 4294967295.0 ? UINT32_MAX : static_cast<uint32_t>(ns + 0.5);
    g.t_rel[i] = static_cast<uint32_t>(static_cast<double>(g.t_rel[i]) * us_per_unit);
  }
  auto* sizes = static_cast<uint32_t*>(map_zero(nops * 4 + 4));
  auto* kinds = static_cast<uint8_t*>(map_zero(nops + 1));
  for (uint64_t i = 0; i < nops; ++i) {
    const PlanOp& op = g.ops[i];
    const uint64_t bytes = op_bytes(op);
    sizes[i] = bytes > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(bytes);
    kinds[i] = op.kind;
  }
  // One file, columns back to back.
  size_t total = 16 + nops * 13;
  auto* out = static_cast<uint8_t*>(map_zero(total));
  std::memcpy(out, kSamplesMagic, 8);
  std::memcpy(out + 8, &nops, 8);
  std::memcpy(out + 16, g.lat, nops * 4);
  std::memcpy(out + 16 + nops * 4, g.t_rel, nops * 4);
  std::memcpy(out + 16 + nops * 8, sizes, nops * 4);
  std::memcpy(out + 16 + nops * 12, kinds, nops);
  write_file(dir, "samples.bin", out, total);
  write_file(dir, "rss.csv", rss_text, rss_len);

  char json[1024];
  int n = std::snprintf(
      json, sizeof json,
      "{\"ops\": %llu, \"threads\": %u, \"ns_per_tick\": %.6f, \"timer_floor_ns\": {\"min\": %.1f, "
      "\"mean\": %.1f}, \"wall_s\": %.6f, \"touch_s\": %.6f, \"rss_baseline_bytes\": %llu, "
      "\"peak_rss_bytes\": %llu, \"final_rss_bytes\": %llu, \"speed\": %g, \"touch\": \"%s\", "
      "\"routes\": %u, \"check\": {\"on\": %s, \"allocs\": %llu, \"frees\": %llu}}\n",
      static_cast<unsigned long long>(nops), nt, g.ns_per_tick,
      static_cast<double>(floor_min) * g.ns_per_tick,
      static_cast<double>(floor_sum) / kFloorRuns * g.ns_per_tick,
      static_cast<double>(wall_ns) * 1e-9, static_cast<double>(touch_ticks) * g.ns_per_tick * 1e-9,
      static_cast<unsigned long long>(g_rss.baseline), static_cast<unsigned long long>(g_rss.peak),
      static_cast<unsigned long long>(g_rss.final), g.speed, argv[4], nroutes,
      g.routes.check ? "true" : "false", static_cast<unsigned long long>(g.routes.allocs.load()),
      static_cast<unsigned long long>(g.routes.frees.load()));
  write_file(dir, "worker.json", json, static_cast<size_t>(n));
  return 0;
}
