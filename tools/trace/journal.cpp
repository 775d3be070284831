// Journal reader and writer (see journal.hpp). Blocks are decoded whole: at most kMaxBlockRaw
// bytes, so memory stays bounded whatever the file claims.
#include "trace/journal.hpp"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <tuple>

#include "trace/nonheap.hpp"

namespace ak::trace {

const char* op_name(Op op) {
  static const char* const names[kOpCount] = {
      "malloc",        "calloc",   "realloc", "free",    "posix_memalign",
      "aligned_alloc", "memalign", "valloc",  "pvalloc", "reallocarray"};
  auto i = static_cast<unsigned>(op);
  return i < kOpCount ? names[i] : "unknown";
}

CallArgs call_args(const Event& e) {
  switch (e.op) {
    case Op::kMalloc:
    case Op::kValloc:
    case Op::kPvalloc:
      return {e.a, 0};
    case Op::kCalloc:
      return {e.a, e.b};
    case Op::kRealloc:
      return {e.b, 0};
    case Op::kPosixMemalign:
    case Op::kAlignedAlloc:
    case Op::kMemalign:
      return {e.b, e.a};
    case Op::kReallocarray:
      return {e.b, e.c};
    case Op::kFree:
      break;
  }
  return {};
}

uint64_t requested_bytes(const Event& e) {
  const CallArgs c = call_args(e);
  if (!is_counted(e.op)) return c.size;
  return c.arg != 0 && c.size > UINT64_MAX / c.arg ? UINT64_MAX : c.size * c.arg;
}

std::string meta_get(const Meta& m, const std::string& key, const std::string& fallback) {
  for (const auto& [k, v] : m)
    if (k == key) return v;
  return fallback;
}

// ---- reader -----------------------------------------------------------------------------------
namespace {

FILE* open_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw JournalError(path + ": cannot open (" + std::strerror(errno) + ")", 0);
  return f;
}

FILE* open_memory(const void* data, size_t size) {
  FILE* f = size ? fmemopen(const_cast<void*>(data), size, "rb") : std::tmpfile();
  if (!f) throw JournalError("cannot open memory buffer", 0);
  return f;
}

}  // namespace

// The public constructors delegate to this one, so a header that does not check out still runs
// the destructor (and closes the file).
JournalReader::JournalReader(FILE* f) : f_(f) {}

JournalReader::JournalReader(const std::string& path) : JournalReader(open_file(path)) {
  open_header();
}

JournalReader::JournalReader(const void* data, size_t size)
    : JournalReader(open_memory(data, size)) {
  open_header();
}

JournalReader::~JournalReader() {
  if (f_) std::fclose(f_);
}

size_t JournalReader::read(void* dst, size_t n) {
  size_t got = std::fread(dst, 1, n, f_);
  offset_ += got;
  return got;
}

uint32_t check_file_header(const FileHeader& h, size_t got) {
  if (got < 8 || std::memcmp(h.magic, kFileMagic, 8) != 0)
    throw JournalError("not a journal: bad magic", 0);
  if (got != sizeof h) throw JournalError("truncated file header", got);
  if (h.version < kMinVersion || h.version > kVersion)
    throw JournalError("unsupported journal version " + std::to_string(h.version), 8);
  if (h.meta_len > kMaxMetaBytes)
    throw JournalError("metadata length " + std::to_string(h.meta_len) + " too large", 12);
  return h.version;
}

void JournalReader::open_header() {
  FileHeader h;
  version_ = check_file_header(h, read(&h, sizeof h));
  std::string meta(h.meta_len, '\0');
  if (read(meta.data(), meta.size()) != meta.size())
    throw JournalError("truncated metadata", offset_);
  if (crc32c(0, meta.data(), meta.size()) != h.meta_crc)
    throw JournalError("metadata checksum mismatch", sizeof h);
  size_t pos = 0;
  while (pos < meta.size()) {
    size_t nl = meta.find('\n', pos);
    if (nl == std::string::npos) nl = meta.size();
    std::string line = meta.substr(pos, nl - pos);
    size_t eq = line.find('=');
    if (eq != std::string::npos) meta_.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    pos = nl + 1;
  }
  scan_ahead();
}

namespace {
// Whether `h` is a well-formed RSS block header of a journal of `version` (its payload still to
// be checked).
bool plausible_rss(const BlockHeader& h, uint32_t version) {
  const size_t size = rss_record_bytes(version);
  return h.thread == 0 && h.event_count > 0 && h.event_count <= kMaxBlockRaw / size &&
         h.stored_len == h.raw_len && h.stored_len == h.event_count * size;
}
// The same for stack and module blocks: raw, thread 0, every entry at least 2 bytes.
bool plausible_table(const BlockHeader& h) {
  return h.thread == 0 && h.event_count > 0 && h.stored_len == h.raw_len &&
         h.raw_len <= kMaxBlockRaw && h.event_count <= h.raw_len / 2;
}
bool is_table(uint32_t codec) {
  return codec == kCodecStacks || codec == kCodecModules || codec == kCodecNames;
}
}  // namespace

bool StackTable::add(uint32_t id, const uint64_t* frames, uint32_t depth) {
  if (id < spans_.size() && spans_[id].second != 0) {
    const auto have = this->frames(id);
    return have.size() == depth && std::equal(have.begin(), have.end(), frames);
  }
  if (id >= spans_.size()) spans_.resize(static_cast<size_t>(id) + 1, {0, 0});
  spans_[id] = {static_cast<uint32_t>(frames_.size()), depth};
  frames_.insert(frames_.end(), frames, frames + depth);
  return true;
}

void JournalReader::read_stacks(const BlockHeader& h, const std::vector<uint8_t>& payload,
                                uint64_t at) {
  const uint8_t* p = payload.data();
  const uint8_t* end = p + payload.size();
  uint64_t frames[kMaxStackDepth];
  for (uint32_t i = 0; i < h.event_count; ++i) {
    uint32_t id, depth;
    if (!decode_stack(p, end, id, frames, depth))
      throw JournalError("malformed stack " + std::to_string(i) + " in stack block", at);
    if (!stacks_.add(id, frames, depth))
      throw JournalError("stack " + std::to_string(id) + " defined twice, differently", at);
  }
  if (p != end) throw JournalError("stack block has bytes after its last stack", at);
}

void JournalReader::read_modules(const BlockHeader& h, const std::vector<uint8_t>& payload,
                                 uint64_t at) {
  const uint8_t* p = payload.data();
  const uint8_t* end = p + payload.size();
  for (uint32_t i = 0; i < h.event_count; ++i) {
    ModuleFields f;
    if (!decode_module(p, end, f))
      throw JournalError("malformed module " + std::to_string(i) + " in module block", at);
    // Times are placed once the clock is known (scan_ahead); ticks kept here until then.
    modules_.push_back({h.base_time_ns, f.start, f.end, f.bias,
                        std::string(reinterpret_cast<const char*>(f.build_id), f.build_id_len),
                        std::string(f.path, f.path_len)});
  }
  if (p != end) throw JournalError("module block has bytes after its last module", at);
}

void JournalReader::read_names(const BlockHeader& h, const std::vector<uint8_t>& payload,
                               uint64_t at) {
  const uint8_t* p = payload.data();
  const uint8_t* end = p + payload.size();
  for (uint32_t i = 0; i < h.event_count; ++i) {
    uint64_t ret, n;
    NamedAddress a;
    bool ok = get_varint(p, end, ret) && get_string(p, end, a.module) && get_varint(p, end, n) &&
              n <= kMaxNamedFrames;
    for (uint64_t f = 0; ok && f < n; ++f) {
      NamedFrame nf;
      uint64_t line = 0;
      ok = get_string(p, end, nf.function) && get_string(p, end, nf.file) &&
           get_varint(p, end, line) && line <= UINT32_MAX;
      nf.line = static_cast<uint32_t>(line);
      a.frames.push_back(std::move(nf));
    }
    if (!ok) throw JournalError("malformed name " + std::to_string(i) + " in names block", at);
    names_[ret] = std::move(a);
  }
  if (p != end) throw JournalError("names block has bytes after its last name", at);
}

// Reads every clock, RSS, stack, module and names block ahead of the events (seeking over other
// payloads), fits ticks to ns through the first and last clock block and keeps the samples, the
// stacks and the module snapshots. A stack or module block that checks out but does not decode
// throws; other damage is left for next() to report.
void JournalReader::scan_ahead() {
  long start = std::ftell(f_);
  uint64_t first_tsc = 0, first_ns = 0, last_tsc = 0, last_ns = 0;
  std::vector<std::pair<uint32_t, RssRecord>> rss;  // with each block's codec
  std::vector<uint8_t> table;
  std::vector<bool> module_ticks;  // per snapshot entry: its time is TSC ticks
  BlockHeader h;
  uint64_t at = static_cast<uint64_t>(start);
  while (std::fread(&h, sizeof h, 1, f_) == 1 && std::memcmp(h.magic, kBlockMagic, 4) == 0 &&
         h.stored_len <= kMaxBlockRaw) {
    const uint64_t block_at = at;
    at += sizeof h + h.stored_len;
    const uint32_t codec = h.codec & kCodecMask;
    if (is_table(codec) && plausible_table(h) && version_ >= 2) {
      table.resize(h.stored_len);
      if (std::fread(table.data(), h.stored_len, 1, f_) != 1) break;
      if (block_crc(h, table.data(), h.stored_len) != h.crc) continue;
      if (codec == kCodecStacks) {
        read_stacks(h, table, block_at);
      } else if (codec == kCodecNames) {
        read_names(h, table, block_at);
      } else {
        const size_t before = modules_.size();
        read_modules(h, table, block_at);
        module_ticks.resize(modules_.size(), false);
        for (size_t i = before; i < modules_.size(); ++i) module_ticks[i] = h.codec & kTicksFlag;
      }
    } else if (codec == kCodecClock && h.stored_len == 16) {
      uint64_t pt[2];
      if (std::fread(pt, 16, 1, f_) != 1) break;
      if (block_crc(h, pt, 16) != h.crc) continue;
      if (clock_points_++ == 0) first_tsc = pt[0], first_ns = pt[1];
      last_tsc = pt[0], last_ns = pt[1];
    } else if (codec == kCodecRss && plausible_rss(h, version_)) {
      table.resize(h.stored_len);
      if (std::fread(table.data(), h.stored_len, 1, f_) != 1) break;
      if (block_crc(h, table.data(), h.stored_len) != h.crc) continue;
      const size_t size = rss_record_bytes(version_);
      for (size_t i = 0; i < h.event_count; ++i) {
        RssRecord r{};  // v1 to v3: no nonheap_bytes (0)
        std::memcpy(&r, table.data() + i * size, size);
        rss.emplace_back(h.codec, r);
      }
    } else if (std::fseek(f_, h.stored_len, SEEK_CUR) != 0) {
      break;
    }
  }
  if (clock_points_ >= 2 && last_tsc > first_tsc) {
    clock_tsc0_ = first_tsc;
    clock_ns0_ = first_ns;
    ns_per_tick_ = static_cast<long double>(last_ns - first_ns) /
                   static_cast<long double>(last_tsc - first_tsc);
  } else {
    clock_points_ = std::min(clock_points_, 1);
  }
  for (const auto& [codec, r] : rss) {
    if ((codec & kTicksFlag) && clock_points_ < 2) continue;  // no clock to place them by
    const uint64_t t = (codec & kTicksFlag) ? ticks_to_ns(r.time) : r.time;
    rss_.push_back({t, r.anon_bytes, r.rss_bytes, r.recorder_bytes, r.nonheap_bytes});
  }
  std::stable_sort(rss_.begin(), rss_.end(),
                   [](const RssSample& x, const RssSample& y) { return x.time_ns < y.time_ns; });
  fill_unmeasured(rss_.size(), [&](size_t i) -> uint64_t& { return rss_[i].nonheap_bytes; });
  for (size_t i = 0; i < modules_.size(); ++i)
    if (module_ticks[i])
      modules_[i].time_ns = clock_points_ >= 2 ? ticks_to_ns(modules_[i].time_ns) : 0;
  std::stable_sort(modules_.begin(), modules_.end(),
                   [](const Module& x, const Module& y) { return x.time_ns < y.time_ns; });
  std::clearerr(f_);
  std::fseek(f_, start, SEEK_SET);
}

uint64_t JournalReader::ticks_to_ns(uint64_t ticks) const {
  long double d =
      static_cast<long double>(static_cast<int64_t>(ticks - clock_tsc0_)) * ns_per_tick_;
  return clock_ns0_ + static_cast<uint64_t>(static_cast<int64_t>(d));
}

// Reads the next event block's header and stored payload into `h` and stored_, checking both
// (clock and RSS blocks, read ahead by scan_clocks, are skipped). False at the end or at an
// incomplete last block (truncated_at); a damaged block throws. Sets `start` to the block's offset.
bool JournalReader::read_block(BlockHeader& h, uint64_t& start) {
  for (;;) {
    if (truncated_at_ >= 0) return false;
    start = offset_;
    size_t got = read(&h, sizeof h);
    if (got == 0) return false;
    if (got != sizeof h) {
      truncated_at_ = static_cast<int64_t>(start);
      return false;
    }
    if (std::memcmp(h.magic, kBlockMagic, 4) != 0) throw JournalError("bad block magic", start);
    uint32_t codec = h.codec & kCodecMask;
    if (codec > kLastCodec || (is_table(codec) && version_ < 2) ||
        (h.codec & ~(kCodecMask | kTicksFlag)) != 0)
      throw JournalError("unknown block codec " + std::to_string(h.codec), start);
    if (codec == kCodecRss) {
      if (!plausible_rss(h, version_)) throw JournalError("implausible RSS block header", start);
    } else if (is_table(codec)) {
      if (!plausible_table(h))
        throw JournalError("implausible stack or module block header", start);
    } else if (h.raw_len > kMaxBlockRaw || h.stored_len > kMaxBlockRaw ||
               (codec != kCodecZstd && h.stored_len != h.raw_len) ||
               (codec == kCodecClock ? h.stored_len != 16 || h.event_count != 0 : h.thread == 0) ||
               h.event_count > h.raw_len / 2) {  // every event takes at least 2 bytes
      throw JournalError("implausible block header", start);
    }
    stored_.resize(h.stored_len);
    if (read(stored_.data(), h.stored_len) != h.stored_len) {
      truncated_at_ = static_cast<int64_t>(start);
      return false;
    }
    if (block_crc(h, stored_.data(), h.stored_len) != h.crc)
      throw JournalError("block checksum mismatch", start);
    if (codec == kCodecRaw || codec == kCodecZstd) return true;
  }
}

bool JournalReader::next(Block& b) {
  BlockHeader h;
  uint64_t start;
  if (!read_block(h, start)) return false;
  bool ticks = h.codec & kTicksFlag;
  if (ticks && clock_points_ < 2)
    throw JournalError("block times are TSC ticks but the journal has fewer than two clock blocks",
                       start);
  const uint8_t* p = stored_.data();
  const uint8_t* end = p + h.stored_len;
  if ((h.codec & kCodecMask) == kCodecZstd) {
    raw_.resize(h.raw_len);
    size_t n = ZSTD_decompress(raw_.data(), raw_.size(), stored_.data(), stored_.size());
    if (ZSTD_isError(n) || n != h.raw_len) throw JournalError("block does not decompress", start);
    p = raw_.data();
    end = p + n;
  }
  b.offset = start;
  b.thread = h.thread;
  b.os_tid = h.os_tid;
  b.events.resize(h.event_count);
  b.stacks.resize(h.event_count);
  CodecState s{h.base_time_ns, 0};
  uint32_t* stacks = version_ >= 2 ? b.stacks.data() : nullptr;
  for (uint32_t i = 0; i < h.event_count; ++i)
    if (!decode_event(p, end, s, b.events[i], stacks ? stacks + i : nullptr, version_ >= 6))
      throw JournalError("malformed event " + std::to_string(i) + " in block", start);
  if (p != end) throw JournalError("block has bytes after its last event", start);
  if (!stacks) std::fill(b.stacks.begin(), b.stacks.end(), 0u);
  if (ticks)
    for (Event& e : b.events) {
      e.time_ns = ticks_to_ns(e.time_ns);
      e.duration_ns =
          static_cast<uint32_t>(std::min<long double>(e.duration_ns * ns_per_tick_, UINT32_MAX));
    }
  return true;
}

// ---- writer -----------------------------------------------------------------------------------
JournalWriter::JournalWriter(const std::string& path, const Meta& meta, bool compress)
    : path_(path), compress_(compress) {
  f_ = std::fopen(path.c_str(), "wb");
  if (!f_) throw std::runtime_error(path + ": cannot create (" + std::strerror(errno) + ")");
  std::string text;
  for (const auto& [k, v] : meta) {
    std::string value = v;
    for (char& c : value)
      if (c == '\n') c = ' ';
    text += k + "=" + value + "\n";
  }
  if (text.size() > kMaxMetaBytes) text.resize(kMaxMetaBytes);
  FileHeader h{};
  std::memcpy(h.magic, kFileMagic, 8);
  h.version = kVersion;
  h.meta_len = static_cast<uint32_t>(text.size());
  h.meta_crc = crc32c(0, text.data(), text.size());
  put(&h, sizeof h);
  put(text.data(), text.size());
}

JournalWriter::~JournalWriter() {
  if (f_) {
    try {
      finish();
    } catch (...) {
    }
  }
}

void JournalWriter::put(const void* data, size_t n) {
  if (std::fwrite(data, 1, n, f_) != n)
    throw std::runtime_error(path_ + ": write failed (" + std::strerror(errno) + ")");
  bytes_ += n;
}

void JournalWriter::add(uint32_t thread, uint32_t os_tid, const Event& e, uint32_t stack) {
  auto [it, fresh] = pending_.try_emplace(thread);
  Pending& p = it->second;
  if (fresh) order_.push_back(thread);
  if (p.count == 0) {
    p.os_tid = os_tid;
    p.base_time = e.time_ns;
    p.state = CodecState{e.time_ns, 0};
  }
  if (p.raw.size() < p.len + kMaxEventBytes)
    p.raw.resize(std::max<size_t>(2 * p.raw.size(), 1u << 16));
  uint8_t* end = encode_event(e, p.state, p.raw.data() + p.len, stack);
  p.len = static_cast<size_t>(end - p.raw.data());
  ++p.count;
  ++events_;
  if (p.len >= (1u << 20)) flush(thread, p);
}

void JournalWriter::flush(uint32_t thread, Pending& p) {
  if (p.count == 0) return;
  BlockHeader h{};
  std::memcpy(h.magic, kBlockMagic, 4);
  h.raw_len = static_cast<uint32_t>(p.len);
  h.event_count = p.count;
  h.thread = thread;
  h.os_tid = p.os_tid;
  h.base_time_ns = p.base_time;
  const uint8_t* payload = p.raw.data();
  size_t payload_len = p.len;
  h.codec = kCodecRaw;
  if (compress_) {
    packed_.resize(ZSTD_compressBound(p.len));
    size_t n = ZSTD_compress(packed_.data(), packed_.size(), p.raw.data(), p.len, 3);
    if (!ZSTD_isError(n) && n < p.len) {
      payload = packed_.data();
      payload_len = n;
      h.codec = kCodecZstd;
    }
  }
  put_block(h, payload, payload_len);
  p.len = 0;
  p.count = 0;
}

void JournalWriter::put_block(BlockHeader h, const uint8_t* payload, size_t len) {
  h.stored_len = static_cast<uint32_t>(len);
  h.crc = block_crc(h, payload, len);
  put(&h, sizeof h);
  put(payload, len);
}

void JournalWriter::add_stack(uint32_t id, const uint64_t* frames, uint32_t depth) {
  if (id == 0 || depth == 0 || depth > kMaxStackDepth)
    throw std::invalid_argument("stack " + std::to_string(id) + ": depth " + std::to_string(depth) +
                                " out of 1.." + std::to_string(kMaxStackDepth));
  const size_t at = stack_buf_.size();
  stack_buf_.resize(at + 11 + 10 * depth);
  uint8_t* end = encode_stack(stack_buf_.data() + at, id, frames, depth);
  stack_buf_.resize(static_cast<size_t>(end - stack_buf_.data()));
  ++stack_count_;
  if (stack_buf_.size() >= (1u << 20)) flush_stacks();
}

void JournalWriter::flush_stacks() {
  for (auto [codec, buf, count] : {std::tuple{kCodecStacks, &stack_buf_, &stack_count_},
                                   std::tuple{kCodecNames, &name_buf_, &name_count_}}) {
    if (*count == 0) continue;
    BlockHeader h{};
    std::memcpy(h.magic, kBlockMagic, 4);
    h.codec = codec;
    h.raw_len = static_cast<uint32_t>(buf->size());
    h.event_count = *count;
    put_block(h, buf->data(), buf->size());
    buf->clear();
    *count = 0;
  }
}

void JournalWriter::add_name(uint64_t ret, const NamedAddress& name) {
  uint8_t v[10];
  name_buf_.insert(name_buf_.end(), v, put_varint(v, ret));
  put_string(name_buf_, name.module);
  const size_t n = std::min<size_t>(name.frames.size(), kMaxNamedFrames);
  name_buf_.insert(name_buf_.end(), v, put_varint(v, n));
  for (size_t i = 0; i < n; ++i) {
    put_string(name_buf_, name.frames[i].function);
    put_string(name_buf_, name.frames[i].file);
    name_buf_.insert(name_buf_.end(), v, put_varint(v, name.frames[i].line));
  }
  ++name_count_;
  if (name_buf_.size() >= (1u << 20)) flush_stacks();
}

void JournalWriter::add_modules(uint64_t time_ns, const std::vector<Module>& modules) {
  std::vector<uint8_t> buf;
  for (const Module& m : modules) {
    ModuleFields f{m.start,
                   m.end,
                   m.bias,
                   reinterpret_cast<const uint8_t*>(m.build_id.data()),
                   static_cast<uint32_t>(std::min<size_t>(m.build_id.size(), kMaxBuildIdBytes)),
                   m.path.data(),
                   static_cast<uint32_t>(std::min<size_t>(m.path.size(), kMaxModulePath))};
    const size_t at = buf.size();
    buf.resize(at + 50 + f.build_id_len + f.path_len);
    buf.resize(static_cast<size_t>(encode_module(buf.data() + at, f) - buf.data()));
  }
  if (modules.empty()) return;
  BlockHeader h{};
  std::memcpy(h.magic, kBlockMagic, 4);
  h.codec = kCodecModules;
  h.raw_len = static_cast<uint32_t>(buf.size());
  h.event_count = static_cast<uint32_t>(modules.size());
  h.base_time_ns = time_ns;
  put_block(h, buf.data(), buf.size());
}

void JournalWriter::finish() {
  if (!f_) return;
  for (uint32_t t : order_) flush(t, pending_[t]);
  flush_stacks();
  FILE* f = f_;
  f_ = nullptr;
  if (std::fclose(f) != 0) throw std::runtime_error(path_ + ": close failed");
}

}  // namespace ak::trace
