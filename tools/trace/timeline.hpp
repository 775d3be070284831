// A whole journal in memory, and its timeline: every call put in one global order and every
// block lifetime given a dense slot number, so replay and stats never look up an address.
// Replay problems of damaged or imported journals are repaired or counted here, never fatal.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "trace/journal.hpp"

namespace ak::trace {

struct ThreadEvents {
  uint32_t thread = 0, os_tid = 0;  // ordinal in the journal, OS thread id
  std::vector<Event> events;        // in the thread's call order
  std::vector<uint32_t> stacks;     // parallel to events when the journal has stacks, else empty
};

struct Trace {
  Meta meta;
  std::vector<ThreadEvents> threads;  // sorted by ordinal
  int64_t truncated_at = -1;          // offset of a cut-off final block, or -1
  uint64_t events = 0;
  std::vector<RssSample> rss;  // the recorded process's memory samples (may be empty)
  StackTable stacks;           // call stacks (v2 journals recorded with --stack)
  std::vector<Module> modules;
  FrameNames names;  // addresses an importer symbolised (heaptrack)
};

// Reads a whole journal. Throws JournalError on damage; a truncated tail is kept in truncated_at.
Trace load_trace(const std::string& path);
Trace load_trace(JournalReader& reader);

// When a call began: a realloc's entry (its return stamp less its duration), else its stamp.
inline uint64_t call_start(const Event& e) {
  return is_realloc(e.op) ? e.time_ns - std::min<uint64_t>(e.duration_ns, e.time_ns) : e.time_ns;
}

inline constexpr uint32_t kNoSlot = UINT32_MAX;

// What one event does to slots. An allocation fills `slot`; a free or realloc empties
// `old_slot`; `repair_slot` is a slot whose free was lost, to be freed just before this event.
struct Resolved {
  uint32_t slot = kNoSlot, old_slot = kNoSlot, repair_slot = kNoSlot;
};

struct Problems {
  uint64_t unknown_frees = 0;     // free of an address not live: dropped
  uint64_t unknown_reallocs = 0;  // realloc of an address not live: replayed as an allocation
  uint64_t reused_live = 0;       // a live address returned again: the old block is freed first
  uint64_t failed_allocs = 0;     // calls that returned null in the recording
  uint64_t total() const { return unknown_frees + unknown_reallocs + reused_live; }
};

struct Timeline {
  std::vector<std::vector<Resolved>> per_thread;  // parallel to Trace::threads[i].events
  uint32_t slots = 0;
  std::vector<uint64_t> slot_bytes;    // requested bytes
  std::vector<uint64_t> slot_born_ns;  // when allocated
  std::vector<uint64_t> slot_died_ns;  // when released; UINT64_MAX if never
  std::vector<uint32_t> slot_thread;   // index into Trace::threads of the allocating thread
  // 1 + the block's pages resident when it was freed, as recorded (v5 journals: blocks of
  // kPagedBlockBytes or more); 0 when unknown.
  std::vector<uint32_t> slot_pages;
  Problems problems;
  uint64_t cross_thread_frees = 0;
  uint64_t peak_live_bytes = 0, peak_live_count = 0;
  // When live bytes first reached their peak, and the slot whose allocation reached it: the
  // blocks live at the peak are the slots up to peak_slot not yet released at peak_ns.
  uint64_t peak_ns = 0;
  uint32_t peak_slot = kNoSlot;
  uint64_t first_ns = 0, last_ns = 0;
};

// Whether slot `s` was live when the journal's live bytes peaked.
inline bool live_at_peak(const Timeline& tl, uint32_t s) {
  return tl.peak_slot != kNoSlot && s <= tl.peak_slot && tl.slot_died_ns[s] > tl.peak_ns;
}

// Orders all calls by time (a free or realloc releases at entry, allocations take effect at
// return) and assigns slots. O(n log n) time, ~40 bytes per event.
Timeline resolve(const Trace& trace);

}  // namespace ak::trace
