// The recorder's call stacks (`allockit record --stack N`): each allocation's N innermost return
// addresses in the program's own code, deduplicated in a lock-free table, and the module map that
// lets them be symbolised after the program is gone (docs/journal-format.md, v2).
//
// Invariants: nothing here allocates (every table is an anonymous mapping reserved at start and
// touched as it fills); the hot path takes no lock: a known stack costs the unwind, a hash and a
// probe; a new stack claims its slot with one compare-and-swap. Definitions reach the journal
// from whichever flush next takes the writer's try-lock, in id order, so a reader (which reads
// every stack block ahead) finds each id an event names, up to the last flush of a killed run.
// Unwinding runs with the thread marked busy: an allocation inside the unwinder, or in a signal
// handler that interrupts it, is passed straight to the real allocator, never journaled.
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "trace/recorder_log.hpp"

namespace ak::trace::rec {

constinit uint32_t g_stack_depth = 0;

namespace {

constexpr uint32_t kSlotBits = 20;  // hash slots: 8 MiB reserved; ids are at most 3/4 of them
constexpr uint32_t kMaxStacks = (1u << kSlotBits) / 4 * 3;
constexpr uint64_t kMaxFrames = 1ull << 25;  // 256 MiB of frames reserved, touched as used
constexpr uint32_t kPending = UINT32_MAX;    // a slot's id while its claimer fills the entry
constexpr uint32_t kMaxProbes = 256;         // then the stack is recorded as unknown (id 0)
constexpr uint32_t kFewSkipped = 4;    // frames usually skipped: the recorder's two, operator new
constexpr uint32_t kExtraFrames = 24;  // unwound beyond N when more than kFewSkipped were
constexpr int kMaxSkipRanges = 8;
constexpr size_t kOutBytes = 1 << 20;  // one stack or module block's payload

struct Entry {
  std::atomic<uint32_t> ready;  // 1 once `offset` and `depth` are written
  uint32_t depth;
  uint64_t offset;  // into g.frames
};

struct Range {
  uintptr_t start, end;
};

struct Stacks {
  bool frame_pointers = false;
  // libunwind's unw_backtrace, from a dlopen at setup (RTLD_LOCAL: none of its symbols, such as
  // its _Unwind_Backtrace, join the program's), so a recording without stacks or by frame
  // pointers never loads it.
  int (*backtrace)(void**, int) = nullptr;
  std::atomic<uint64_t>* slots = nullptr;  // (hash tag << 32) | id, 0 empty
  Entry* entries = nullptr;                // by id, from 1
  uint64_t* frames = nullptr;
  std::atomic<uint32_t> next_id{1};
  // One bit per 4 KiB page of `slots` ever written: the table is touched at random, and a memory
  // sample must count each touched page as the recorder's (not the program's) once.
  std::atomic<uint64_t> slot_pages[(sizeof(uint64_t) << kSlotBits) / 4096 / 64] = {};
  std::atomic<uint64_t> frames_used{0};
  // Frames in these ranges are skipped while they lead the stack: the recorder itself and the C
  // and C++ runtimes (an operator new is attributed to its caller, a strdup to its caller).
  Range skip[kMaxSkipRanges] = {};
  int skip_count = 0;
  // Writer state, under `writer` (a spin lock held only by flushes and module snapshots).
  SpinLock writer;
  uint32_t written = 0;  // ids up to this one are in the journal
  uint8_t* out = nullptr;
  size_t out_touched = 0;  // bytes of `out` ever written (counted as the recorder's memory)
  unsigned long long dl_adds = 0, dl_subs = 0;  // dl_iterate_phdr's counters at the last snapshot
  std::atomic<bool> snapshot_due{false};
  char exe[4096] = {};
  size_t unwinder_bytes = 0;  // libunwind's per-thread cache (capture_stack)
};
constinit Stacks g{};

void* reserve(size_t bytes) {
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return m == MAP_FAILED ? nullptr : m;
}

uint64_t hash_frames(const uint64_t* f, uint32_t n) {
  uint64_t h = n * 0x9E3779B97F4A7C15ull;
  for (uint32_t i = 0; i < n; ++i) {
    h = (h ^ f[i]) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  return h;
}

void write_table_block(uint32_t codec, const uint8_t* payload, size_t len, uint32_t count) {
  if (count == 0 || g_fd < 0) return;
  const size_t touched = (len + 4095) & ~size_t{4095};
  if (touched > g.out_touched) {
    count_recorder_bytes(touched - g.out_touched);
    g.out_touched = touched;
  }
  BlockHeader h{};
  std::memcpy(h.magic, kBlockMagic, 4);
  h.codec = codec;
  h.stored_len = h.raw_len = static_cast<uint32_t>(len);
  h.event_count = count;
  h.base_time_ns = codec == (kCodecModules | kTicksFlag) ? __rdtsc() : 0;
  h.crc = block_crc(h, payload, len);
  uint8_t clock[kClockBlockBytes];
  make_clock_block(clock);  // a module snapshot's time converts through it
  iovec v[3] = {{clock, sizeof clock}, {&h, sizeof h}, {const_cast<uint8_t*>(payload), len}};
  write_all(g_fd, v, 3);
}

// ---- module map -------------------------------------------------------------------------------
// The GNU build-id of a loaded object, read from its PT_NOTE segments in memory.
void find_build_id(const dl_phdr_info* info, ModuleFields& m) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    auto p = static_cast<uintptr_t>(info->dlpi_addr + ph.p_vaddr);
    const uintptr_t end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* n = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const uintptr_t name = p + sizeof *n;
      const uintptr_t desc = name + ((n->n_namesz + 3) & ~3u);
      p = desc + ((n->n_descsz + 3) & ~3u);
      if (p > end) break;
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
          std::memcmp(reinterpret_cast<const void*>(name), "GNU", 4) == 0 &&
          n->n_descsz <= kMaxBuildIdBytes) {
        m.build_id = reinterpret_cast<const uint8_t*>(desc);
        m.build_id_len = n->n_descsz;
        return;
      }
    }
  }
}

struct Snapshot {
  uint8_t* p;
  uint8_t* end;
  uint32_t count;
  bool first;
};

int add_module(dl_phdr_info* info, size_t, void* arg) {
  auto* s = static_cast<Snapshot*>(arg);
  ModuleFields m;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    lo = lo < ph.p_vaddr ? lo : ph.p_vaddr;
    hi = hi > ph.p_vaddr + ph.p_memsz ? hi : ph.p_vaddr + ph.p_memsz;
  }
  if (lo >= hi) return 0;
  m.start = info->dlpi_addr + lo;
  m.end = info->dlpi_addr + hi;
  m.bias = info->dlpi_addr;
  find_build_id(info, m);
  // The main program's name is empty in the loader's list.
  m.path = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : (s->first ? g.exe : "");
  m.path_len = static_cast<uint32_t>(strnlen(m.path, kMaxModulePath));
  s->first = false;
  if (s->end - s->p < static_cast<ptrdiff_t>(50 + m.build_id_len + m.path_len)) return 0;
  s->p = encode_module(s->p, m);
  ++s->count;
  g.dl_adds = info->dlpi_adds;
  g.dl_subs = info->dlpi_subs;
  return 0;
}

// Writes a module block of every loaded object. Caller holds the writer.
void write_modules_locked() {
  Snapshot s{g.out, g.out + kOutBytes, 0, true};
  dl_iterate_phdr(add_module, &s);
  write_table_block(kCodecModules | kTicksFlag, g.out, static_cast<size_t>(s.p - g.out), s.count);
}

int read_counters(dl_phdr_info* info, size_t, void* arg) {
  auto* c = static_cast<unsigned long long*>(arg);
  c[0] = info->dlpi_adds;
  c[1] = info->dlpi_subs;
  return 1;  // the first object is enough
}

// Whether objects were loaded or unloaded since the last snapshot (a new stack may point into
// one: its snapshot is then written with the next flush).
void note_module_changes() {
  unsigned long long c[2] = {0, 0};
  dl_iterate_phdr(read_counters, c);
  if (c[0] != g.dl_adds || c[1] != g.dl_subs) g.snapshot_due.store(true, std::memory_order_relaxed);
}

int learn_skip_ranges(dl_phdr_info* info, size_t, void*) {
  bool skip = is_runtime_object(info->dlpi_name ? info->dlpi_name : "");
  Dl_info self{};
  dladdr(reinterpret_cast<void*>(&learn_skip_ranges), &self);
  skip = skip || reinterpret_cast<uintptr_t>(self.dli_fbase) == info->dlpi_addr;
  if (!skip || g.skip_count == kMaxSkipRanges) return 0;
  Range r{UINTPTR_MAX, 0};
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    r.start = r.start < info->dlpi_addr + ph.p_vaddr ? r.start : info->dlpi_addr + ph.p_vaddr;
    r.end = r.end > info->dlpi_addr + ph.p_vaddr + ph.p_memsz
                ? r.end
                : info->dlpi_addr + ph.p_vaddr + ph.p_memsz;
  }
  if (r.start < r.end) g.skip[g.skip_count++] = r;
  return 0;
}

bool skipped(uint64_t ip) {
  for (int i = 0; i < g.skip_count; ++i)
    if (ip >= g.skip[i].start && ip < g.skip[i].end) return true;
  return false;
}

// ---- unwinding ----------------------------------------------------------------------------------
// Frame pointers: the saved rbp chain, followed only while it climbs inside the thread's stack
// (so every read is of mapped stack memory), whatever the program was compiled with.
thread_local uintptr_t tl_stack_top = 0;

__attribute__((noinline)) int walk_frame_pointers(uint64_t* out, int max) {
  if (tl_stack_top == 0) {
    pthread_attr_t a;
    void* lo = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
      pthread_attr_getstack(&a, &lo, &size);
      pthread_attr_destroy(&a);
    }
    tl_stack_top = reinterpret_cast<uintptr_t>(lo) + size;
  }
  auto fp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  int n = 0;
  while (n < max && fp && (fp & 7) == 0 && fp + 16 <= tl_stack_top) {
    const auto* f = reinterpret_cast<const uintptr_t*>(fp);
    const uintptr_t next = f[0], ret = f[1];
    if (ret == 0) break;
    out[n++] = ret;
    if (next <= fp || next - fp > (64u << 20)) break;
    fp = next;
  }
  return n;
}

// The unwind's cost grows with the frames walked, so it walks N + kFewSkipped first, and again
// further only when more frames were skipped and the stack goes on.
int walk(uint64_t* raw, int want) {
  return g.frame_pointers ? walk_frame_pointers(raw, want)
                          : g.backtrace(reinterpret_cast<void**>(raw), want);
}

// The first of `got` frames outside the recorder and the runtimes.
int first_own(const uint64_t* raw, int got) {
  int first = 0;
  while (first < got && skipped(raw[first])) ++first;
  return first;
}

uint32_t unwind(uint64_t* out) {
  uint64_t raw[kMaxStackDepth + kExtraFrames];
  int want = static_cast<int>(g_stack_depth + kFewSkipped);
  int got = walk(raw, want);
  int first = first_own(raw, got);
  if (got == want && got - first < static_cast<int>(g_stack_depth)) {
    want = static_cast<int>(g_stack_depth + kExtraFrames);
    got = walk(raw, want);
    first = first_own(raw, got);
  }
  if (first == got) {  // no frame of the program's own: keep what lies outside the recorder
    first = 0;
    while (first + 1 < got && skipped(raw[first])) ++first;
  }
  uint32_t n = 0;
  for (int i = first; i < got && n < g_stack_depth; ++i) out[n++] = raw[i];
  return n;
}

// ---- the table ----------------------------------------------------------------------------------
bool same(uint32_t id, const uint64_t* f, uint32_t n) {
  const Entry& e = g.entries[id];
  return e.depth == n && std::memcmp(g.frames + e.offset, f, n * sizeof *f) == 0;
}

// A new stack's id, 0 when the table is full.
uint32_t define(const uint64_t* f, uint32_t n) {
  const uint32_t id = g.next_id.fetch_add(1, std::memory_order_relaxed);
  const uint64_t at = g.frames_used.fetch_add(n, std::memory_order_relaxed);
  if (id >= kMaxStacks || at + n > kMaxFrames) return 0;
  std::memcpy(g.frames + at, f, n * sizeof *f);
  g.entries[id].depth = n;
  g.entries[id].offset = at;
  g.entries[id].ready.store(1, std::memory_order_release);
  count_recorder_bytes(sizeof(Entry) + n * sizeof *f);  // written in order: counted as they fill
  return id;
}

uint32_t find_or_add(const uint64_t* f, uint32_t n) {
  const uint64_t h = hash_frames(f, n);
  const uint64_t tag = (h >> 32) | 1;
  const uint32_t mask = (1u << kSlotBits) - 1;
  for (uint32_t i = static_cast<uint32_t>(h) & mask, probes = 0; probes < kMaxProbes;
       i = (i + 1) & mask, ++probes) {
    uint64_t v = g.slots[i].load(std::memory_order_acquire);
    if (v == 0) {
      const uint64_t claim = tag << 32 | kPending;
      if (g.slots[i].compare_exchange_strong(v, claim, std::memory_order_acq_rel)) {
        const uint32_t page = i / (4096 / sizeof(uint64_t));
        const uint64_t bit = 1ull << (page % 64);
        if (!(g.slot_pages[page / 64].fetch_or(bit, std::memory_order_relaxed) & bit))
          count_recorder_bytes(4096);
        const uint32_t id = define(f, n);
        g.slots[i].store(tag << 32 | id, std::memory_order_release);
        note_module_changes();  // after the slot is published: threads waiting on it go on
        return id;
      }
    }
    if ((v >> 32) != tag) continue;
    // Another thread may be filling in this slot: wait for it (a bounded wait, so a claimer that
    // died in a fork parent cannot stall a child).
    for (int spin = 0; (v & 0xffffffffu) == kPending && spin < (1 << 20); ++spin) {
      __builtin_ia32_pause();
      v = g.slots[i].load(std::memory_order_acquire);
    }
    const auto id = static_cast<uint32_t>(v);
    if (id == kPending) return 0;
    if (id == 0 || same(id, f, n)) return id;
  }
  return 0;
}

}  // namespace

// libunwind keeps a cache of its own for each thread that unwinds (about 270 KiB here): that
// memory is the recorder's. Its size is measured once, around the first unwind at setup (one
// thread, nothing else running), and counted for every live thread that has unwound
// (stacks_thread_exit takes it back), not measured per thread: other threads' allocations in
// those microseconds would be counted too.
thread_local bool tl_unwound = false;

void setup_stacks(uint32_t depth, bool frame_pointers) {
  if (depth == 0) return;
  g.slots = static_cast<std::atomic<uint64_t>*>(reserve(sizeof(uint64_t) << kSlotBits));
  g.entries = static_cast<Entry*>(reserve(sizeof(Entry) * kMaxStacks));
  g.frames = static_cast<uint64_t*>(reserve(sizeof(uint64_t) * kMaxFrames));
  g.out = static_cast<uint8_t*>(reserve(kOutBytes));
  if (!g.slots || !g.entries || !g.frames || !g.out) return;
  const ssize_t n = readlink("/proc/self/exe", g.exe, sizeof g.exe - 1);
  g.exe[n > 0 ? n : 0] = 0;
  if (!frame_pointers) {
    if (void* lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL))
      g.backtrace = reinterpret_cast<int (*)(void**, int)>(dlsym(lib, "unw_backtrace"));
    if (!g.backtrace) {
      static const char kNoUnwind[] =
          "allockit record: libunwind.so.8 not found; call stacks follow frame pointers\n";
      (void)!write(2, kNoUnwind, sizeof kNoUnwind - 1);
      frame_pointers = true;
    }
  }
  dl_iterate_phdr(learn_skip_ranges, nullptr);  // after the dlopen: libunwind is a runtime
  g.frame_pointers = frame_pointers;
  g_stack_depth = depth > kMaxStackDepth ? kMaxStackDepth : depth;
  if (!frame_pointers) {  // the size of libunwind's per-thread cache: this thread's first unwind
    uint64_t warm[kMaxStackDepth + kExtraFrames];
    const uint64_t before = anon_bytes_now();
    Guard busy;
    walk(warm, 4);
    const uint64_t after = anon_bytes_now();
    g.unwinder_bytes = after > before ? after - before : 0;
    tl_unwound = true;
    count_recorder_bytes(g.unwinder_bytes);
  }
  g.writer.lock();
  write_modules_locked();
  g.writer.unlock();
}

uint32_t capture_stack() {
  Guard busy;
  uint64_t f[kMaxStackDepth];
  if (!tl_unwound) [[unlikely]] {
    tl_unwound = true;
    count_recorder_bytes(g.unwinder_bytes);
  }
  const uint32_t n = unwind(f);
  return n ? find_or_add(f, n) : 0;
}

void flush_stacks(bool wait) {
  if (!g.out || g_fd < 0) return;
  const uint32_t next = g.next_id.load(std::memory_order_acquire);
  const bool snapshot = g.snapshot_due.load(std::memory_order_relaxed);
  if (g.written + 1 >= next && !snapshot) return;
  if (wait)
    g.writer.lock();
  else if (!g.writer.try_lock())
    return;
  if (g.snapshot_due.exchange(false, std::memory_order_relaxed)) write_modules_locked();
  uint8_t* p = g.out;
  uint32_t count = 0;
  uint32_t id = g.written + 1;
  const uint32_t last = next < kMaxStacks ? next : kMaxStacks;
  for (; id < last; ++id) {
    const Entry& e = g.entries[id];
    if (!e.ready.load(std::memory_order_acquire)) break;  // being defined: the next flush
    if (e.depth == 0) continue;                           // abandoned in a fork (below)
    if (static_cast<size_t>(g.out + kOutBytes - p) < 11 + 10 * kMaxStackDepth) {
      write_table_block(kCodecStacks, g.out, static_cast<size_t>(p - g.out), count);
      p = g.out;
      count = 0;
    }
    p = encode_stack(p, id, g.frames + e.offset, e.depth);
    ++count;
  }
  write_table_block(kCodecStacks, g.out, static_cast<size_t>(p - g.out), count);
  g.written = id - 1;
  g.writer.unlock();
}

void stacks_thread_exit() {
  if (!tl_unwound) return;
  tl_unwound = false;
  uncount_recorder_bytes(g.unwinder_bytes);
}

void stacks_after_fork_child() {
  if (!g.out) return;
  // The child's journal is a new file: every definition and a module map go into it again.
  // An id a thread of the parent was defining when it forked is never finished here.
  const uint32_t next = g.next_id.load();
  for (uint32_t id = 1; id < next && id < kMaxStacks; ++id)
    if (!g.entries[id].ready.load()) g.entries[id].depth = 0, g.entries[id].ready.store(1);
  g.writer.unlock();
  g.written = 0;
  g.snapshot_due.store(true);
}

}  // namespace ak::trace::rec
