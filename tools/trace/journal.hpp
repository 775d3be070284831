// Journal files: the one streaming reader and writer every tool uses (format: codec.hpp,
// docs/journal-format.md). Not thread-safe; one object per thread. Errors throw JournalError,
// whose message names the file offset.
#pragma once
#include <cstdint>
#include <cstdio>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trace/codec.hpp"
#include "trace/event.hpp"

namespace ak::trace {

class JournalError : public std::runtime_error {
 public:
  JournalError(const std::string& what, uint64_t offset)
      : std::runtime_error(what + " at offset " + std::to_string(offset)), offset_(offset) {}
  uint64_t offset() const { return offset_; }

 private:
  uint64_t offset_;
};

using Meta = std::vector<std::pair<std::string, std::string>>;
std::string meta_get(const Meta& m, const std::string& key, const std::string& fallback = "");

// A memory sample of the recorded process (RSS blocks), times in ns.
struct RssSample {
  uint64_t time_ns = 0;
  uint64_t anon_bytes = 0;      // RssAnon
  uint64_t rss_bytes = 0;       // VmRSS
  uint64_t recorder_bytes = 0;  // of anon_bytes, the recorder's own buffers
  uint64_t nonheap_bytes = 0;   // of anon_bytes, not heap (nonheap.hpp); 0 before v4
};

// The call stacks of a v2 journal (stack blocks): return addresses, innermost first, by id.
class StackTable {
 public:
  // Defines stack `id` (>= 1); false if it is already defined differently.
  bool add(uint32_t id, const uint64_t* frames, uint32_t depth);
  // The frames of stack `id`; empty for 0 or an id the journal does not define.
  std::span<const uint64_t> frames(uint32_t id) const {
    if (id >= spans_.size()) return {};
    return {frames_.data() + spans_[id].first, spans_[id].second};
  }
  uint32_t ids() const { return spans_.empty() ? 0 : static_cast<uint32_t>(spans_.size() - 1); }
  bool empty() const { return frames_.empty(); }

 private:
  std::vector<uint64_t> frames_;
  std::vector<std::pair<uint32_t, uint32_t>> spans_;  // by id: offset into frames_, depth
};

// An object loaded in the recorded process, from a module block: where its loadable segments
// were mapped, its load bias, GNU build-id (raw bytes) and path, and when the snapshot that saw
// it was taken.
struct Module {
  uint64_t time_ns = 0;
  uint64_t start = 0, end = 0, bias = 0;
  std::string build_id, path;
};

// A return address as the journal's source symbolised it (names blocks): its module and its
// frames, innermost (inlined) first.
struct NamedFrame {
  std::string function, file;
  uint32_t line = 0;
};
struct NamedAddress {
  std::string module;
  std::vector<NamedFrame> frames;
};
using FrameNames = std::unordered_map<uint64_t, NamedAddress>;

struct Block {
  uint64_t offset = 0;  // of the block header in the file
  uint32_t thread = 0, os_tid = 0;
  std::vector<Event> events;
  std::vector<uint32_t> stacks;  // parallel to events: each allocation's stack id, 0 for none
};

// Checks a file header of which `got` bytes were read (magic, length, version, metadata length),
// throwing the JournalError every reader gives. Returns the version.
uint32_t check_file_header(const FileHeader& h, size_t got);

// What `allockit record` checks when the program ends: the events of journal `path` and where
// an incomplete last block starts (-1 if none), from its block headers alone (one seek each)
// and the last block's checksum, so the command ends milliseconds after the program. Throws
// JournalError on a file that is no journal or a block header that is no block; every other
// block is checked when the journal is read (JournalReader).
struct JournalSkim {
  uint64_t events = 0;
  int64_t truncated_at = -1;
};
JournalSkim skim_journal(const std::string& path);

class JournalReader {
 public:
  // Opens `path` and reads its header. Throws JournalError on a missing file, a wrong magic or
  // version, or a damaged header.
  explicit JournalReader(const std::string& path);
  // Reads from memory (fuzzing, tests). The bytes must outlive the reader.
  JournalReader(const void* data, size_t size);
  ~JournalReader();
  JournalReader(const JournalReader&) = delete;
  JournalReader& operator=(const JournalReader&) = delete;

  const Meta& meta() const { return meta_; }
  uint32_t version() const { return version_; }
  // Call stacks and module snapshots (v2, read ahead at open); empty when recorded without
  // stacks. Module snapshots come in time order.
  const StackTable& stacks() const { return stacks_; }
  const std::vector<Module>& modules() const { return modules_; }
  const FrameNames& names() const { return names_; }
  // The recorded process's memory samples in time order (read ahead at open); empty when the
  // journal has none (imports, journals of older recorders).
  const std::vector<RssSample>& rss() const { return rss_; }
  // Reads the next block into `b`. Returns false at the end. A block cut short by the end of the
  // file ends the journal and is reported by truncated_at(); a damaged block throws.
  bool next(Block& b);
  // Offset of an incomplete block at the end of the file, or -1.
  int64_t truncated_at() const { return truncated_at_; }
  uint64_t offset() const { return offset_; }

 private:
  explicit JournalReader(FILE* f);
  void open_header();
  void scan_ahead();
  void read_stacks(const BlockHeader& h, const std::vector<uint8_t>& payload, uint64_t at);
  void read_modules(const BlockHeader& h, const std::vector<uint8_t>& payload, uint64_t at);
  void read_names(const BlockHeader& h, const std::vector<uint8_t>& payload, uint64_t at);
  bool read_block(BlockHeader& h, uint64_t& start);
  size_t read(void* dst, size_t n);
  uint64_t ticks_to_ns(uint64_t ticks) const;

  FILE* f_ = nullptr;
  uint64_t offset_ = 0;
  int64_t truncated_at_ = -1;
  Meta meta_;
  uint32_t version_ = 0;
  std::vector<uint8_t> stored_, raw_;
  // TSC-to-ns fit from the first and last clock blocks (journals straight from the recorder).
  uint64_t clock_tsc0_ = 0, clock_ns0_ = 0;
  long double ns_per_tick_ = 0;
  int clock_points_ = 0;
  std::vector<RssSample> rss_;
  StackTable stacks_;
  std::vector<Module> modules_;
  FrameNames names_;
};

class JournalWriter {
 public:
  // Creates `path` (replacing it) and writes the header. `compress` selects zstd blocks.
  JournalWriter(const std::string& path, const Meta& meta, bool compress = true);
  ~JournalWriter();  // finish()es if not done; errors there are lost, so call finish()
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;

  // Appends an event of thread `thread` (>= 1); a thread's events must come in its call order.
  // `stack` is the allocation's stack id (add_stack), 0 for none.
  void add(uint32_t thread, uint32_t os_tid, const Event& e, uint32_t stack = 0);
  // Defines stack `id` (>= 1): `depth` (1..kMaxStackDepth) return addresses, innermost first.
  void add_stack(uint32_t id, const uint64_t* frames, uint32_t depth);
  // Writes a module snapshot taken at `time_ns`.
  void add_modules(uint64_t time_ns, const std::vector<Module>& modules);
  // Names return address `ret` (a source's own symbolisation, written with the stacks).
  void add_name(uint64_t ret, const NamedAddress& name);
  // Writes all buffered blocks and closes the file. Throws std::runtime_error on an I/O error.
  void finish();
  uint64_t events() const { return events_; }
  uint64_t bytes() const { return bytes_; }

 private:
  struct Pending {
    uint32_t os_tid = 0, count = 0;
    uint64_t base_time = 0;
    CodecState state;
    std::vector<uint8_t> raw;  // raw.size() is capacity; `len` bytes are used
    size_t len = 0;
  };
  void flush(uint32_t thread, Pending& p);
  void flush_stacks();
  void put_block(BlockHeader h, const uint8_t* payload, size_t len);
  void put(const void* data, size_t n);

  std::string path_;
  FILE* f_ = nullptr;
  bool compress_;
  uint64_t events_ = 0, bytes_ = 0;
  std::unordered_map<uint32_t, Pending> pending_;
  std::vector<uint8_t> packed_;  // compression scratch
  std::vector<uint32_t> order_;  // threads in first-seen order, for deterministic output
  std::vector<uint8_t> stack_buf_, name_buf_;
  uint32_t stack_count_ = 0, name_count_ = 0;
};

}  // namespace ak::trace
