// Symbols for recorded return addresses, at analysis time: the module a journal's module map
// places each address in, then function, file and line (inlined frames included) from elfutils
// libdwfl, C++ names demangled. A module's file is the recorded path when its GNU build-id still
// matches, else a file with that build-id under the debug directories given, else
// /usr/lib/debug/.build-id; separate debug info is found by libdwfl's standard search. Unknown
// addresses read `module+0xOFFSET`. Addresses the journal's source already named (a heaptrack
// import's names blocks) take those names. Not thread-safe.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "trace/journal.hpp"

namespace ak::trace {

// One source-level frame of a return address. An address inside inlined code yields several,
// innermost first; all but the last have `inlined` set.
struct SourceFrame {
  std::string function;  // demangled; empty when unknown
  std::string file;      // empty when unknown
  int line = 0;
  bool inlined = false;
  std::string module;     // the object's file name (no directory)
  uint64_t offset = 0;    // address - load bias: what addr2line -e MODULE takes
  bool absolute = false;  // offset is the run-time address (the bias is unknown: an import)

  // "function (file:line)", "function", or "module+0xOFFSET" ("module@0xADDRESS" when absolute)
  // when nothing is known.
  std::string label() const;
};

class Symbolizer {
 public:
  explicit Symbolizer(std::vector<Module> modules, std::vector<std::string> debug_dirs = {},
                      FrameNames names = {});
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // The frames of return address `ret` (symbolised at ret - 1, inside the call). Cached.
  const std::vector<SourceFrame>& frames(uint64_t ret);
  // The module holding `addr`, or null.
  const Module* module_of(uint64_t addr) const;
  // For each module looked up: where its symbols came from, or why there are none.
  std::vector<std::string> notes() const;

 private:
  struct Loaded;
  Loaded* load(const Module& m);

  std::vector<Module> modules_;  // distinct objects, by start address
  std::vector<std::string> debug_dirs_;
  FrameNames names_;
  std::unordered_map<const Module*, std::unique_ptr<Loaded>> loaded_;
  std::unordered_map<uint64_t, std::vector<SourceFrame>> cache_;
};

// The demangled form of a C++ symbol name, or the name itself.
std::string demangle(const std::string& name);

}  // namespace ak::trace
