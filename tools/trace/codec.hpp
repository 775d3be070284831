// Journal format v6 (reads v1 to v5), the byte level: file header, block header and the event
// codec. Header-only and heap-free, so the recorder can encode inside a traced program's malloc.
// The layout is specified in docs/journal-format.md; change both together.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#include "trace/event.hpp"

namespace ak::trace {

inline constexpr char kFileMagic[8] = {'\x89', 'A', 'K', 'J', '\r', '\n', '\x1a', '\n'};
inline constexpr uint32_t kVersion = 6;  // what writers write (v3: kSameStackFlag; v4: RssRecord's
                                         // nonheap_bytes; v5: kPagesFlag; v6: kUnstampedFlag)
inline constexpr uint32_t kMinVersion = 1;  // the oldest readers read: v1 has no stack ids
inline constexpr char kBlockMagic[4] = {'A', 'K', 'B', '1'};
inline constexpr uint32_t kCodecRaw = 0;
inline constexpr uint32_t kCodecZstd = 1;
// A clock block: no events; its 16-byte payload is {uint64 tsc, uint64 CLOCK_MONOTONIC ns},
// one calibration point for journals whose times are TSC ticks.
inline constexpr uint32_t kCodecClock = 2;
// An RSS block: no events; its payload is event_count RssRecord samples of the recording
// process's memory (times are TSC ticks when kTicksFlag is set, else ns). Thread 0.
inline constexpr uint32_t kCodecRss = 3;
// A stack block (v2): no events; event_count call stacks, each `id, depth, frames` as varints
// (the first frame whole, the others zigzag deltas from the previous one). Thread 0.
inline constexpr uint32_t kCodecStacks = 4;
// A module block (v2): no events; a snapshot of the objects loaded at base_time_ns (ticks when
// kTicksFlag is set), event_count entries `start, end, bias, build-id length, build-id, path
// length, path`. Thread 0.
inline constexpr uint32_t kCodecModules = 5;
// A names block (v2): no events; event_count return addresses symbolised by the journal's
// source (an importer: heaptrack's own symbolisation), each `address, module, frames`, a frame
// `function, file, line`, innermost first; strings as a varint length and bytes. Thread 0.
inline constexpr uint32_t kCodecNames = 6;
inline constexpr uint32_t kLastCodec = kCodecNames;
inline constexpr uint32_t kMaxNameBytes = 4096;
inline constexpr uint32_t kMaxNamedFrames = 64;
inline constexpr uint32_t kCodecMask = 0xff;
// Flag on an event block: its times and durations are TSC ticks, converted to ns by readers
// through the journal's clock blocks (what the recorder writes).
inline constexpr uint32_t kTicksFlag = 0x100;
inline constexpr size_t kMaxEventBytes = 80;  // op byte + up to seven 10-byte varints + stack id
// Set on an event's op byte (v2): a varint stack id (kCodecStacks) follows the event's fields.
inline constexpr uint8_t kStackFlag = 0x80;
// Set on an event's op byte instead (v3): the event's stack id is the block's previous one, so
// none follows. An allocation site called in a loop costs no bytes for its stack.
inline constexpr uint8_t kSameStackFlag = 0x40;
// Set on a free's op byte (v5): a varint follows the pointer, the block's pages that were
// resident when it was freed (Event::b, with Event::c = 1), as the recorder measures them for
// blocks of kPagedBlockBytes or more. What the program really wrote of its big blocks.
inline constexpr uint8_t kPagesFlag = 0x20;
inline constexpr uint64_t kPagedBlockBytes = 64 << 10;
// Set on an event's op byte (v6): no time follows. The call happened at or after the block's
// previous time and before its thread's next stamped event (the recorder reads the clock on
// every realloc and one other call in a few: recorder_log.hpp). Readers give the event the
// previous time and mark it (Event::unstamped).
inline constexpr uint8_t kUnstampedFlag = 0x10;
inline constexpr uint32_t kMaxStackDepth = 64;
inline constexpr uint32_t kMaxBuildIdBytes = 64;
inline constexpr uint32_t kMaxModulePath = 4096;
inline constexpr uint32_t kMaxBlockRaw = 1u << 24;  // readers reject larger blocks
inline constexpr uint32_t kMaxMetaBytes = 1u << 16;

// One memory sample in an RSS block, as /proc/self/statm gives it: RssAnon (resident minus
// file-backed and shared memory), VmRSS, the part of RssAnon that is the recorder's own buffers
// and (v4) the part that is not heap (nonheap.hpp); readers subtract both. v1 to v3 journals
// hold the first four fields only (kRssRecordV3Bytes).
struct RssRecord {
  uint64_t time;
  uint64_t anon_bytes;
  uint64_t rss_bytes;
  uint64_t recorder_bytes;
  uint64_t nonheap_bytes;
};
static_assert(sizeof(RssRecord) == 40);
inline constexpr size_t kRssRecordV3Bytes = 32;
inline size_t rss_record_bytes(uint32_t version) {
  return version >= 4 ? sizeof(RssRecord) : kRssRecordV3Bytes;
}

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t meta_len;  // key=value lines follow the header
  uint32_t meta_crc;
  uint32_t reserved;
};
static_assert(sizeof(FileHeader) == 24);

struct BlockHeader {
  char magic[4];
  uint32_t codec;
  uint32_t stored_len;  // payload bytes that follow in the file
  uint32_t raw_len;     // payload bytes once decoded
  uint32_t event_count;
  uint32_t thread;  // ordinal of the thread within its process, from 1
  uint32_t os_tid;
  uint32_t crc;           // CRC-32C of this header (crc field zero) followed by the stored payload
  uint64_t base_time_ns;  // the first event's time delta is taken from here
};
static_assert(sizeof(BlockHeader) == 40);

// ---- CRC-32C (Castagnoli): the SSE4.2 instruction where the CPU has it, else a table ---------
struct Crc32cTable {
  uint32_t v[256];
  constexpr Crc32cTable() : v() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0x82F63B78u ^ (c >> 1) : c >> 1;
      v[i] = c;
    }
  }
};
inline constexpr Crc32cTable kCrcTable;

inline uint32_t crc32c_table(uint32_t crc, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) crc = kCrcTable.v[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
// ~0.1 ns per byte: 8 bytes per instruction.
__attribute__((target("sse4.2"))) inline uint32_t crc32c_hw(uint32_t crc, const uint8_t* p,
                                                            size_t n) {
  uint64_t c = crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
  }
  crc = static_cast<uint32_t>(c);
  for (; n > 0; --n) crc = _mm_crc32_u8(crc, *p++);
  return crc;
}
#endif

// Continues a CRC: pass 0 to start, the previous result to extend.
inline uint32_t crc32c(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
#if defined(__x86_64__)
  static const bool hw = (__builtin_cpu_init(), __builtin_cpu_supports("sse4.2"));
  if (hw) return ~crc32c_hw(~crc, p, n);
#endif
  return ~crc32c_table(~crc, p, n);
}

inline uint32_t block_crc(BlockHeader h, const void* payload, size_t n) {
  h.crc = 0;
  return crc32c(crc32c(0, &h, sizeof h), payload, n);
}

// ---- varints ----------------------------------------------------------------------------------
inline uint8_t* put_varint(uint8_t* out, uint64_t v) {
  while (v >= 0x80) {
    *out++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *out++ = static_cast<uint8_t>(v);
  return out;
}
inline uint64_t zigzag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ (v >> 63 ? ~0ull : 0);
}
inline int64_t unzigzag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

// Reads one varint; false if it runs past `end` or over 10 bytes.
inline bool get_varint(const uint8_t*& p, const uint8_t* end, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (p == end) return false;
    uint8_t b = *p++;
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return shift < 63 || b <= 1;
  }
  return false;
}

// ---- events -----------------------------------------------------------------------------------
// Delta state of one block: times and pointers are stored as zigzag deltas from the previous ones.
struct CodecState {
  uint64_t time_ns = 0;
  uint64_t ptr = 0;
  uint32_t stack = 0;  // the last stack id written in the block (kSameStackFlag)
};

// Encodes one call at `out` (at least kMaxEventBytes free) and returns the end. Fields follow
// Event's meaning of a, b, c; `time` is ignored when not `stamped` (kUnstampedFlag). With `op` a
// constant at the call site the switch folds away, so the recorder's encoders are straight-line
// code. Cost: ~6-10 bytes.
[[gnu::always_inline]] inline uint8_t* encode_call(CodecState& s, uint8_t* out, Op op,
                                                   uint64_t time, uint64_t a, uint64_t b,
                                                   uint64_t c, uint64_t result, uint32_t duration,
                                                   uint32_t stack = 0, bool stamped = true) {
  auto ptr = [&](uint64_t p) {
    out = put_varint(out, zigzag(static_cast<int64_t>(p - s.ptr)));
    s.ptr = p;
  };
  const bool same_stack = stack != 0 && stack == s.stack;
  const bool pages = op == Op::kFree && c != 0;
  *out++ = static_cast<uint8_t>(static_cast<uint8_t>(op) | (pages ? kPagesFlag : 0) |
                                (stamped ? 0 : kUnstampedFlag) |
                                (same_stack ? kSameStackFlag
                                 : stack    ? kStackFlag
                                            : 0));
  if (stamped) {
    out = put_varint(out, zigzag(static_cast<int64_t>(time - s.time_ns)));
    s.time_ns = time;
  }
  switch (op) {
    case Op::kFree:
      ptr(a);
      if (pages) out = put_varint(out, b);
      break;
    case Op::kMalloc:
    case Op::kValloc:
    case Op::kPvalloc:
      out = put_varint(out, a);
      ptr(result);
      break;
    case Op::kCalloc:
    case Op::kAlignedAlloc:
    case Op::kMemalign:
      out = put_varint(out, a);
      out = put_varint(out, b);
      ptr(result);
      break;
    case Op::kPosixMemalign:
      out = put_varint(out, a);
      out = put_varint(out, b);
      out = put_varint(out, c);
      ptr(result);
      break;
    case Op::kRealloc:
      ptr(a);
      out = put_varint(out, b);
      ptr(result);
      out = put_varint(out, duration);
      break;
    case Op::kReallocarray:
      ptr(a);
      out = put_varint(out, b);
      out = put_varint(out, c);
      ptr(result);
      out = put_varint(out, duration);
      break;
  }
  if (stack && !same_stack) {
    out = put_varint(out, stack);
    s.stack = stack;
  }
  return out;
}

inline uint8_t* encode_event(const Event& e, CodecState& s, uint8_t* out, uint32_t stack = 0) {
  return encode_call(s, out, e.op, e.time_ns, e.a, e.b, e.c, e.result, e.duration_ns, stack,
                     !e.unstamped);
}

// Decodes one event and its stack id (0: none; only v2 journals, `stacks`, may carry one); false
// on a malformed or truncated event (p is then unspecified). `unstamped_ok`: kUnstampedFlag may
// be set (v6 journals).
inline bool decode_event(const uint8_t*& p, const uint8_t* end, CodecState& s, Event& e,
                         uint32_t* stack = nullptr, bool unstamped_ok = true) {
  uint64_t v;
  auto ptr = [&](uint64_t& dst) {
    if (!get_varint(p, end, v)) return false;
    s.ptr += static_cast<uint64_t>(unzigzag(v));
    dst = s.ptr;
    return true;
  };
  auto num = [&](uint64_t& dst) { return get_varint(p, end, dst); };
  if (p == end) return false;
  const bool has_stack = *p & kStackFlag, same_stack = *p & kSameStackFlag;
  const bool pages = *p & kPagesFlag, unstamped = *p & kUnstampedFlag;
  const uint8_t flags = kStackFlag | kSameStackFlag | kPagesFlag | kUnstampedFlag;
  if ((*p & ~flags) >= kOpCount || ((has_stack || same_stack) && !stack) ||
      (unstamped && !unstamped_ok) || (has_stack && same_stack) || (same_stack && s.stack == 0) ||
      (pages && (*p & ~flags) != static_cast<uint8_t>(Op::kFree)))
    return false;
  e = Event{};
  e.op = static_cast<Op>(*p++ & ~flags);
  if (!unstamped) {
    if (!get_varint(p, end, v)) return false;
    s.time_ns += static_cast<uint64_t>(unzigzag(v));
  }
  e.time_ns = s.time_ns;
  e.unstamped = unstamped;
  uint64_t dur = 0;
  bool ok = true;
  switch (e.op) {
    case Op::kFree:
      ok = ptr(e.a) && (!pages || num(e.b));
      e.c = pages;
      break;
    case Op::kMalloc:
    case Op::kValloc:
    case Op::kPvalloc:
      ok = num(e.a) && ptr(e.result);
      break;
    case Op::kCalloc:
    case Op::kAlignedAlloc:
    case Op::kMemalign:
      ok = num(e.a) && num(e.b) && ptr(e.result);
      break;
    case Op::kPosixMemalign:
      ok = num(e.a) && num(e.b) && num(e.c) && ptr(e.result);
      break;
    case Op::kRealloc:
      ok = ptr(e.a) && num(e.b) && ptr(e.result) && num(dur);
      break;
    case Op::kReallocarray:
      ok = ptr(e.a) && num(e.b) && num(e.c) && ptr(e.result) && num(dur);
      break;
  }
  if (!ok || dur > UINT32_MAX) return false;
  e.duration_ns = static_cast<uint32_t>(dur);
  if (stack) {
    uint64_t id = same_stack ? s.stack : 0;
    if (has_stack && (!get_varint(p, end, id) || id == 0 || id > UINT32_MAX)) return false;
    *stack = static_cast<uint32_t>(id);
    if (has_stack) s.stack = static_cast<uint32_t>(id);
  }
  return true;
}

// ---- stacks and modules (v2) --------------------------------------------------------------------
// Whether an object is one whose frames lead a recorded stack but are left out of it (the C and
// C++ runtimes and the loader: an operator new or a strdup is its caller's allocation). `path`
// is the object's path or file name.
inline bool is_runtime_object(const char* path) {
  const char* slash = std::strrchr(path, '/');
  const char* base = slash ? slash + 1 : path;
  for (const char* r : {"libc.so", "libstdc++.so", "libgcc_s.so", "ld-linux"})
    if (std::strncmp(base, r, std::strlen(r)) == 0) return true;
  return false;
}

// Encodes one stack of `depth` (1..kMaxStackDepth) return addresses, innermost first. At most
// 11 + 10 * depth bytes.
inline uint8_t* encode_stack(uint8_t* out, uint32_t id, const uint64_t* frames, uint32_t depth) {
  out = put_varint(out, id);
  out = put_varint(out, depth);
  uint64_t prev = 0;
  for (uint32_t i = 0; i < depth; ++i) {
    out = put_varint(out, i == 0 ? frames[0] : zigzag(static_cast<int64_t>(frames[i] - prev)));
    prev = frames[i];
  }
  return out;
}

// Decodes one stack into `frames` (room for kMaxStackDepth); false when malformed.
inline bool decode_stack(const uint8_t*& p, const uint8_t* end, uint32_t& id, uint64_t* frames,
                         uint32_t& depth) {
  uint64_t v, n;
  if (!get_varint(p, end, v) || v == 0 || v > UINT32_MAX || !get_varint(p, end, n) || n == 0 ||
      n > kMaxStackDepth)
    return false;
  id = static_cast<uint32_t>(v);
  depth = static_cast<uint32_t>(n);
  uint64_t prev = 0;
  for (uint32_t i = 0; i < depth; ++i) {
    if (!get_varint(p, end, v)) return false;
    frames[i] = i == 0 ? v : prev + static_cast<uint64_t>(unzigzag(v));
    prev = frames[i];
  }
  return true;
}

// One loaded object, as a module block holds it: the address range of its loadable segments,
// the load bias (file virtual address + bias = run-time address), its GNU build-id and path.
struct ModuleFields {
  uint64_t start = 0, end = 0, bias = 0;
  const uint8_t* build_id = nullptr;
  uint32_t build_id_len = 0;
  const char* path = nullptr;
  uint32_t path_len = 0;
};

// At most 50 + kMaxBuildIdBytes + kMaxModulePath bytes.
inline uint8_t* encode_module(uint8_t* out, const ModuleFields& m) {
  out = put_varint(out, m.start);
  out = put_varint(out, m.end);
  out = put_varint(out, m.bias);
  out = put_varint(out, m.build_id_len);
  std::memcpy(out, m.build_id, m.build_id_len);
  out += m.build_id_len;
  out = put_varint(out, m.path_len);
  std::memcpy(out, m.path, m.path_len);
  return out + m.path_len;
}

// Decodes one module entry; build_id and path point into the payload. False when malformed.
inline bool decode_module(const uint8_t*& p, const uint8_t* end, ModuleFields& m) {
  uint64_t id_len, path_len;
  if (!get_varint(p, end, m.start) || !get_varint(p, end, m.end) || !get_varint(p, end, m.bias) ||
      m.end < m.start || !get_varint(p, end, id_len) || id_len > kMaxBuildIdBytes ||
      static_cast<uint64_t>(end - p) < id_len)
    return false;
  m.build_id = p;
  m.build_id_len = static_cast<uint32_t>(id_len);
  p += id_len;
  if (!get_varint(p, end, path_len) || path_len > kMaxModulePath ||
      static_cast<uint64_t>(end - p) < path_len)
    return false;
  m.path = reinterpret_cast<const char*>(p);
  m.path_len = static_cast<uint32_t>(path_len);
  p += path_len;
  return true;
}

// ---- names (v2) -----------------------------------------------------------------------------
inline void put_string(std::vector<uint8_t>& out, const std::string& s) {
  uint8_t len[10];
  const size_t n = std::min<size_t>(s.size(), kMaxNameBytes);
  out.insert(out.end(), len, put_varint(len, n));
  out.insert(out.end(), s.begin(), s.begin() + static_cast<long>(n));
}

inline bool get_string(const uint8_t*& p, const uint8_t* end, std::string& s) {
  uint64_t n;
  if (!get_varint(p, end, n) || n > kMaxNameBytes || static_cast<uint64_t>(end - p) < n)
    return false;
  s.assign(reinterpret_cast<const char*>(p), n);
  p += n;
  return true;
}

}  // namespace ak::trace
