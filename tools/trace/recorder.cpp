// liballockit_record.so: an LD_PRELOAD recorder that journals every allocation call of a program.
// Invariants: it never allocates (buffers come from mmap, messages from the stack); each thread
// appends to its own buffer under an uncontended per-buffer flag, so there is no global lock on
// the hot path; a buffer is written as one self-contained block with one write(2) on an O_APPEND
// file, so the journal up to the last flush stays readable whatever happens to the process.
// Configured by `allockit record` through ALLOCKIT_RECORD_OUT, ALLOCKIT_RECORD_PID,
// ALLOCKIT_RECORD_FOLLOW_FORKS, ALLOCKIT_RECORD_STACK (frames per allocation) and
// ALLOCKIT_RECORD_UNWIND (libunwind or fp) (docs/journal-format.md).
#include <dlfcn.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "trace/recorder_log.hpp"

using namespace ak::trace;
using namespace ak::trace::rec;

namespace ak::trace::rec {

// ---- the real allocator ---------------------------------------------------------------------
struct Real {
  void* (*malloc)(size_t);
  void* (*calloc)(size_t, size_t);
  void* (*realloc)(void*, size_t);
  void (*free)(void*);
  int (*posix_memalign)(void**, size_t, size_t);
  void* (*aligned_alloc)(size_t, size_t);
  void* (*memalign)(size_t, size_t);
  void* (*valloc)(size_t);
  void* (*pvalloc)(size_t);
  void* (*reallocarray)(void*, size_t, size_t);
  size_t (*malloc_usable_size)(void*);
  int (*execve)(const char*, char* const[], char* const[]);
  int (*execvpe)(const char*, char* const[], char* const[]);
  void (*exit_)(int);
  void (*Exit_)(int);
  CreateThread pthread_create;
};
Real g_real;
std::atomic<int> g_real_state{0};  // 0 none, 1 resolving, 2 ready

// dlsym may allocate before the real functions are known: serve it from a static bump buffer.
alignas(64) char g_boot[64 * 1024];
std::atomic<size_t> g_boot_used{0};
void* boot_alloc(size_t n, size_t align = 16) {
  size_t off = g_boot_used.fetch_add(n + align, std::memory_order_relaxed);
  if (off + n + align > sizeof g_boot) return nullptr;
  auto p = (reinterpret_cast<uintptr_t>(g_boot + off) + align - 1) & ~(uintptr_t)(align - 1);
  return reinterpret_cast<void*>(p);
}
bool is_boot(const void* p) {
  return p >= static_cast<const void*>(g_boot) &&
         p < static_cast<const void*>(g_boot + sizeof g_boot);
}

template <class F>
void resolve(F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}
void resolve_real() {
  int expected = 0;
  if (!g_real_state.compare_exchange_strong(expected, 1)) {
    while (g_real_state.load() != 2) {
    }
    return;
  }
  resolve(g_real.malloc, "malloc");
  resolve(g_real.calloc, "calloc");
  resolve(g_real.realloc, "realloc");
  resolve(g_real.free, "free");
  resolve(g_real.posix_memalign, "posix_memalign");
  resolve(g_real.aligned_alloc, "aligned_alloc");
  resolve(g_real.memalign, "memalign");
  resolve(g_real.valloc, "valloc");
  resolve(g_real.pvalloc, "pvalloc");
  resolve(g_real.reallocarray, "reallocarray");
  resolve(g_real.malloc_usable_size, "malloc_usable_size");
  resolve(g_real.execve, "execve");
  resolve(g_real.execvpe, "execvpe");
  resolve(g_real.exit_, "_exit");
  resolve(g_real.Exit_, "_Exit");
  resolve(g_real.pthread_create, "pthread_create");
  g_real_state.store(2);
}

const char* g_out = nullptr;
bool g_follow_forks = false;

// ---- the journal file -----------------------------------------------------------------------
// Formats into a fixed buffer; never allocates.
struct Text {
  char buf[8192];
  size_t n = 0;
  void add(const char* s) {
    while (*s && n + 1 < sizeof buf) buf[n++] = *s++;
  }
  void add_u(unsigned long long v) {
    char tmp[24];
    int i = 0;
    do tmp[i++] = static_cast<char>('0' + v % 10);
    while ((v /= 10) != 0);
    while (i > 0 && n + 1 < sizeof buf) buf[n++] = tmp[--i];
  }
  void kv(const char* k, const char* v) { add(k), add("="), add(v), add("\n"); }
  void kv_u(const char* k, unsigned long long v) { add(k), add("="), add_u(v), add("\n"); }
};

void read_cmdline(char* out, size_t cap) {
  out[0] = 0;
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, out, cap - 1);
  close(fd);
  if (n <= 0) return;
  for (ssize_t i = 0; i < n; ++i)
    if (out[i] == 0 || out[i] == '\n') out[i] = ' ';
  while (n > 0 && out[n - 1] == ' ') --n;
  out[n] = 0;
}

void write_header(int fd) {
  Text t;
  char cmd[2048], exe[512];
  read_cmdline(cmd, sizeof cmd);
  ssize_t en = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[en > 0 ? en : 0] = 0;
  utsname u;
  uname(&u);
  timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(g_real.malloc), &info);
  t.kv("source", "allockit record");
  t.kv("command", cmd);
  t.kv("executable", exe);
  t.kv("host", u.nodename);
  t.kv("kernel", u.release);
  t.kv_u("pid", static_cast<unsigned long long>(getpid()));
  t.kv_u("ppid", static_cast<unsigned long long>(getppid()));
  t.kv_u("start_unix_ns", static_cast<unsigned long long>(rt.tv_sec) * 1000000000ull + rt.tv_nsec);
  t.kv_u("start_monotonic_ns", mono_ns());
  t.kv("clock", "tsc");
  t.add("allocator=");
  t.add(info.dli_fname ? info.dli_fname : "unknown");
  t.add(" (glibc ");
  t.add(gnu_get_libc_version());
  t.add(")\n");
  FileHeader h{};
  std::memcpy(h.magic, kFileMagic, 8);
  h.version = kVersion;
  h.meta_len = static_cast<uint32_t>(t.n);
  h.meta_crc = crc32c(0, t.buf, t.n);
  write_all(fd, &h, sizeof h);
  write_all(fd, t.buf, t.n);
  uint8_t clock[kClockBlockBytes];
  make_clock_block(clock);
  write_all(fd, clock, sizeof clock);
}

// Opens the first free name of OUT, OUT.1, ... (root process) or OUT.PID, OUT.PID.1, ...
int open_journal(bool root) {
  char path[4096];
  for (int n = 0; n < 1000; ++n) {
    Text t;
    t.add(g_out);
    if (!root) t.add("."), t.add_u(static_cast<unsigned long long>(getpid()));
    if (n > 0) t.add("."), t.add_u(static_cast<unsigned long long>(n));
    t.buf[t.n] = 0;
    std::memcpy(path, t.buf, t.n + 1);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      // Out of the way of the program's own descriptors: a program that reuses low numbers
      // (or closes and reopens them) must never receive our blocks in its files.
      int high = fcntl(fd, F_DUPFD_CLOEXEC, 900);
      if (high >= 0) {
        close(fd);
        fd = high;
      }
      write_header(fd);
      return fd;
    }
    if (errno != EEXIST) return -1;
  }
  return -1;
}

// ---- process events -------------------------------------------------------------------------
constexpr int kFatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTERM, SIGINT, SIGHUP};
struct sigaction g_old_actions[sizeof kFatal / sizeof kFatal[0]];

void on_fatal(int sig) {
  flush_all(false);
  for (size_t i = 0; i < sizeof kFatal / sizeof kFatal[0]; ++i)
    if (kFatal[i] == sig) sigaction(sig, &g_old_actions[i], nullptr);
  raise(sig);
}

void install_signal_handlers() {
  for (size_t i = 0; i < sizeof kFatal / sizeof kFatal[0]; ++i) {
    struct sigaction old {};
    sigaction(kFatal[i], nullptr, &old);
    if (old.sa_handler != SIG_DFL) continue;  // the program's (or an inherited SIG_IGN) stays
    struct sigaction sa {};
    sa.sa_handler = on_fatal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NODEFER;
    sigaction(kFatal[i], &sa, &g_old_actions[i]);
  }
}

void after_fork_child() {
  // The child's copies of the logs hold the parent's unflushed events: the parent writes them.
  for (ThreadLog* l = g_logs.load(); l; l = l->next) {
    l->busy.store(0);
    l->lock.store(0);
    start_block(l);
    l->owned.store(l == tl_log ? 1 : 0);
  }
  rss_after_fork_child();
  stacks_after_fork_child();
  writer_after_fork_child();
  if (g_fd >= 0) close(g_fd);
  g_fd = g_follow_forks ? open_journal(false) : -1;
  g_next_thread.store(2);
  tl_thread = 1;
  if (tl_log) tl_log->thread = 1, tl_log->os_tid = static_cast<uint32_t>(syscall(SYS_gettid));
}

__attribute__((constructor)) void recorder_init() {
  ++tl_busy;
  if (g_real_state.load() != 2) resolve_real();
  g_out = getenv("ALLOCKIT_RECORD_OUT");
  const char* root = getenv("ALLOCKIT_RECORD_PID");
  const char* follow = getenv("ALLOCKIT_RECORD_FOLLOW_FORKS");
  g_follow_forks = follow && follow[0] == '1';
  if (g_out && g_out[0]) {
    bool is_root = root && strtol(root, nullptr, 10) == getpid();
    if (is_root || g_follow_forks) g_fd = open_journal(is_root);
    if (g_fd >= 0) {
      setup_membarrier();
      setup_packer();
      pthread_key_create(&g_key, thread_exit);
      setup_memory_samples(reinterpret_cast<const void*>(g_real.malloc));
      pthread_atfork(nullptr, nullptr, after_fork_child);
      install_signal_handlers();
      const char* depth = getenv("ALLOCKIT_RECORD_STACK");
      const char* unwinder = getenv("ALLOCKIT_RECORD_UNWIND");
      setup_stacks(depth ? static_cast<uint32_t>(strtoul(depth, nullptr, 10)) : 0,
                   unwinder && strcmp(unwinder, "fp") == 0);
      start_rss_sampler();
    }
  }
  --tl_busy;
}

__attribute__((destructor)) void recorder_fini() {
  ++tl_busy;
  flush_all(true);
  g_exiting.store(true);  // events from later destructors are written one by one
  --tl_busy;
}

inline bool recording() {
  return g_fd >= 0 && tl_busy == 0;
}

// Runs a real allocator call with the thread marked busy: calls the allocator makes itself
// (glibc's reallocarray calls realloc through the PLT) are its own, not the program's.
template <class F>
inline auto real_call(F&& f) {
  ++tl_busy;
  auto r = f();
  --tl_busy;
  return r;
}

inline void ensure_real() {
  if (g_real_state.load(std::memory_order_acquire) != 2) [[unlikely]] {
    ++tl_busy;
    resolve_real();
    --tl_busy;
  }
}

inline uint32_t clamp32(uint64_t v) {
  return v > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(v);
}

// ---- big blocks' resident pages (kPagesFlag) -----------------------------------------------
// An allocation of kPagedBlockBytes or more sets a bit for its 16 MiB span, one for its 64 KiB
// region and one chosen by its address. A free whose three bits are set asks the real allocator
// the block's size and, for a big block, mincore how many of its pages are resident: what the
// program wrote of it, with what the allocator wrote (for a block inside an allocator's heap, also
// pages an earlier block there left resident). A replay touches that many pages instead of all.
// Cost: a load per free of one word of spans, which every free reads and so stays in L1; a second
// load only in a span where a big block began, from the 4 KiB table of regions (whose 64 lines a
// program churning memory evicts: that load was 29% of larson's samples in the recorder's free
// when it came first); a third only in such a region (from the 64 KiB table, which missed L1 on
// most of larson's frees when it came first); two calls for a big free.
constexpr unsigned kBigSpanShift = 24;    // one bit per 16 MiB span (hashed) in g_big_spans
constexpr unsigned kBigRegionsLog2 = 15;  // 4 KiB of bits, one per 64 KiB region (hashed)
constexpr unsigned kBigBitsLog2 = 19;     // 64 KiB of bits: few false hits
std::atomic<uint64_t> g_big_spans{0};
std::atomic<uint64_t> g_big_regions[(size_t(1) << kBigRegionsLog2) / 64];
std::atomic<uint64_t> g_big_bits[(size_t(1) << kBigBitsLog2) / 64];

inline size_t hashed_bit(uintptr_t key, unsigned log2) {
  return size_t(key * 0x9E3779B97F4A7C15ull >> (64 - log2));
}
inline void set_bit(std::atomic<uint64_t>* bits, size_t i) {
  bits[i / 64].fetch_or(uint64_t(1) << (i % 64), std::memory_order_relaxed);
}
inline bool test_bit(const std::atomic<uint64_t>* bits, size_t i) {
  return (bits[i / 64].load(std::memory_order_relaxed) >> (i % 64)) & 1;
}
inline void note_block(const void* p, uint64_t bytes) {
  if (bytes < kPagedBlockBytes || p == nullptr) return;
  const auto a = reinterpret_cast<uintptr_t>(p);
  set_bit(&g_big_spans, hashed_bit(a >> kBigSpanShift, 6));
  set_bit(g_big_regions, hashed_bit(a >> 16, kBigRegionsLog2));
  set_bit(g_big_bits, hashed_bit(a >> 4, kBigBitsLog2));
}
inline bool may_be_big(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  return test_bit(&g_big_spans, hashed_bit(a >> kBigSpanShift, 6)) &&
         test_bit(g_big_regions, hashed_bit(a >> 16, kBigRegionsLog2)) &&
         test_bit(g_big_bits, hashed_bit(a >> 4, kBigBitsLog2));
}

// The resident pages of block `p` when it is one of kPagedBlockBytes or more (*pages; true),
// else false.
bool big_block_pages(void* p, uint64_t* pages) {
  if (g_real.malloc_usable_size == nullptr) return false;
  const size_t n = real_call([&] { return g_real.malloc_usable_size(p); });
  if (n < kPagedBlockBytes) return false;
  const uintptr_t first = reinterpret_cast<uintptr_t>(p) & ~(kPage - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  return resident_pages(reinterpret_cast<void*>(first), end - first, pages);
}

}  // namespace ak::trace::rec

// ---- the interposed entry points ---------------------------------------------------------------
#define AK_EXPORT __attribute__((visibility("default")))

extern "C" {

// Records malloc(n) = p after the real call, the call's stack included (--stack N), where the
// fast path does not append it: no stacks, and a log that takes the event without a flush
// (takes_fast_append). Returns p.
__attribute__((noinline)) void* malloc_record_slow(size_t n, void* p) {
  const uint64_t t = sampled_stamp();
  note_block(p, n);
  record(Op::kMalloc, t, n, 0, 0, p, 0, call_stack());
  return p;
}

// malloc before the real allocator is known, inside the recorder, or when not recording.
__attribute__((noinline)) void* malloc_slow(size_t n) {
  if (g_real_state.load(std::memory_order_acquire) != 2) [[unlikely]] {
    if (g_real_state.load() == 1 || tl_busy) return boot_alloc(n);
    ensure_real();
  }
  bool rec = recording();
  void* p = real_call([&] { return g_real.malloc(n); });
  return rec ? malloc_record_slow(n, p) : p;
}

// Records malloc(n) = p, stamped `t`, when the fast path could not append it (record_locked
// while flushers are at work). Returns p.
__attribute__((noinline)) void* malloc_record_locked(size_t n, void* p, uint64_t t) {
  record_locked(tl_log, Call{Op::kMalloc, t, n, 0, 0, reinterpret_cast<uint64_t>(p), 0, 0});
  return p;
}

// The fast path: a recorded call without stacks that the thread's log takes without a flush.
// Kept free of calls but the real malloc's and tail calls, so it saves two registers, not
// five. With free's fast path: 21 instructions less per event on larson (callgrind, 1.22M
// events: 335.8M -> 309.5M in all), about a seventh of the recorder's own; the time it takes
// 1-3% less.
AK_EXPORT void* malloc(size_t n) {
  if (g_real_state.load(std::memory_order_acquire) != 2 || tl_busy != 0 || g_fd < 0) [[unlikely]]
    return malloc_slow(n);
  ++tl_busy;
  void* p = g_real.malloc(n);
  --tl_busy;
  ThreadLog* const log = tl_log;
  if (g_stack_depth != 0 || !takes_fast_append(log)) [[unlikely]]
    return malloc_record_slow(n, p);
  const uint64_t t = sampled_stamp();
  note_block(p, n);
  if (!append_fast(log, Call{Op::kMalloc, t, n, 0, 0, reinterpret_cast<uint64_t>(p), 0, 0}))
      [[unlikely]]
    return malloc_record_locked(n, p, t);
  return p;
}

AK_EXPORT void* calloc(size_t n, size_t size) {
  if (g_real_state.load(std::memory_order_acquire) != 2) [[unlikely]] {
    if (g_real_state.load() == 1 || tl_busy) {
      if (size && n > SIZE_MAX / size) return nullptr;
      return boot_alloc(n * size);  // static memory is zero
    }
    ensure_real();
  }
  bool rec = recording();
  void* p = real_call([&] { return g_real.calloc(n, size); });
  if (rec) {
    const uint64_t t = sampled_stamp();
    note_block(p, uint64_t(n) * size);
    record(Op::kCalloc, t, n, size, 0, p, 0, call_stack());
  }
  return p;
}

// free's path for everything but a recorded free of a block that cannot be big, which its
// thread's log takes on the fast path.
__attribute__((noinline)) void free_slow(void* p) {
  if (is_boot(p)) return;
  ensure_real();
  if (recording()) {
    const uint64_t t = sampled_stamp();
    uint64_t pages = 0;
    const bool measured = p != nullptr && may_be_big(p) && big_block_pages(p, &pages);
    record(Op::kFree, t, reinterpret_cast<uint64_t>(p), pages, measured, nullptr);
  }
  ++tl_busy;
  g_real.free(p);
  --tl_busy;
}

// Records free(p), stamped `t`, when the fast path could not append it (flushers at work), then
// frees p.
__attribute__((noinline)) void free_record_locked(void* p, uint64_t t) {
  record_locked(tl_log, Call{Op::kFree, t, reinterpret_cast<uint64_t>(p), 0, 0, 0, 0, 0});
  ++tl_busy;
  g_real.free(p);
  --tl_busy;
}

// The fast path: the event appended, then the real free as a tail call, with no frame at all.
// The real free runs without the busy mark that real_call sets: a free of glibc, jemalloc,
// tcmalloc or mimalloc calls no interposed function (glibc's reallocarray, which does, keeps the
// mark).
AK_EXPORT void free(void* p) {
  ThreadLog* const log = tl_log;
  if (g_real_state.load(std::memory_order_acquire) != 2 || tl_busy != 0 || g_fd < 0 ||
      p == nullptr || is_boot(p) || may_be_big(p) || !takes_fast_append(log)) [[unlikely]]
    return free_slow(p);
  const uint64_t t = sampled_stamp();
  if (!append_fast(log, Call{Op::kFree, t, reinterpret_cast<uint64_t>(p), 0, 0, 0, 0, 0}))
      [[unlikely]]
    return free_record_locked(p, t);
  return g_real.free(p);
}

AK_EXPORT void* realloc(void* old, size_t n) {
  if (is_boot(old) || (g_real_state.load() != 2 && (g_real_state.load() == 1 || tl_busy))) {
    void* p = g_real_state.load() == 2 ? g_real.malloc(n) : boot_alloc(n);
    if (p && old) {  // only boot blocks get here: copy what the static buffer can hold
      size_t room = static_cast<size_t>(g_boot + sizeof g_boot - static_cast<char*>(old));
      std::memcpy(p, old, n < room ? n : room);
    }
    return p;
  }
  ensure_real();
  if (!recording()) return g_real.realloc(old, n);
  uint64_t t0 = stamp_ticks();
  void* p = real_call([&] { return g_real.realloc(old, n); });
  uint64_t t1 = stamp_ticks();
  note_block(p, n);
  record(Op::kRealloc, t1, reinterpret_cast<uint64_t>(old), n, 0, p, clamp32(t1 - t0),
         call_stack());
  return p;
}

AK_EXPORT void* reallocarray(void* old, size_t n, size_t size) {
  ensure_real();
  if (!recording()) return g_real.reallocarray(old, n, size);
  uint64_t t0 = stamp_ticks();
  void* p = real_call([&] { return g_real.reallocarray(old, n, size); });
  uint64_t t1 = stamp_ticks();
  note_block(p, uint64_t(n) * size);
  record(Op::kReallocarray, t1, reinterpret_cast<uint64_t>(old), n, size, p, clamp32(t1 - t0),
         call_stack());
  return p;
}

AK_EXPORT int posix_memalign(void** out, size_t align, size_t n) {
  ensure_real();
  bool rec = recording();
  int rc = real_call([&] { return g_real.posix_memalign(out, align, n); });
  if (rec) {
    const uint64_t t = sampled_stamp();
    if (rc == 0) note_block(*out, n);
    record(Op::kPosixMemalign, t, align, n, static_cast<uint64_t>(rc), rc == 0 ? *out : nullptr, 0,
           call_stack());
  }
  return rc;
}

// The aligned and page-aligned calls share one shape: run the real call, then record.
#define AK_RECORD_CALL(op, a, b, bytes, call)   \
  ensure_real();                                \
  bool rec = recording();                       \
  void* p = real_call([&] { return call; });    \
  if (rec) {                                    \
    const uint64_t t = sampled_stamp();         \
    note_block(p, bytes);                       \
    record(op, t, a, b, 0, p, 0, call_stack()); \
  }                                             \
  return p

AK_EXPORT void* aligned_alloc(size_t align, size_t n) {
  AK_RECORD_CALL(Op::kAlignedAlloc, align, n, n, g_real.aligned_alloc(align, n));
}
AK_EXPORT void* memalign(size_t align, size_t n) {
  AK_RECORD_CALL(Op::kMemalign, align, n, n, g_real.memalign(align, n));
}
AK_EXPORT void* valloc(size_t n) {
  AK_RECORD_CALL(Op::kValloc, n, 0, n, g_real.valloc(n));
}
AK_EXPORT void* pvalloc(size_t n) {
  AK_RECORD_CALL(Op::kPvalloc, n, 0, n, g_real.pvalloc(n));
}
#undef AK_RECORD_CALL

// A thread the program starts registers its stack for the memory samples' non-heap share.
AK_EXPORT int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*),
                             void* arg) {
  ensure_real();
  if (recording()) return create_registered_thread(g_real.pthread_create, thread, attr, fn, arg);
  return g_real.pthread_create(thread, attr, fn, arg);
}

// exec replaces the image, and _exit skips destructors: write what is buffered first.
AK_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  ensure_real();
  flush_all(true);
  return g_real.execve(path, argv, envp);
}
AK_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  ensure_real();
  flush_all(true);
  return g_real.execvpe(file, argv, envp);
}
AK_EXPORT int execv(const char* path, char* const argv[]) {
  return execve(path, argv, environ);
}
AK_EXPORT int execvp(const char* file, char* const argv[]) {
  return execvpe(file, argv, environ);
}

AK_EXPORT void _exit(int status) {
  ensure_real();
  flush_all(true);
  g_real.exit_(status);
  __builtin_unreachable();
}
AK_EXPORT void _Exit(int status) {
  ensure_real();
  flush_all(true);
  g_real.Exit_(status);
  __builtin_unreachable();
}

}  // extern "C"
