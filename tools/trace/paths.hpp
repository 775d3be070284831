// Where the tools find each other. Two layouts:
// - the build tree: the recorder library, the replay worker and liballockit sit next to the
//   `allockit` executable, and the report package is in the source tree;
// - an install: the helpers sit in libexec/allockit, liballockit in lib and the report package in
//   share/allockit/python, each found relative to the installed executable (never the build tree).
// The build tree is recognised by the replay worker next to the executable.
#pragma once
#include <string>

namespace ak::trace {

struct ToolPaths {
  std::string recorder;       // liballockit_record.so
  std::string worker;         // allockit-replay
  std::string liballockit;    // the overriding library replayed as "allockit"
  std::string prefixed;       // liballockit-prefixed: the pools and arenas `advise` routes to
  std::string report_python;  // the folder holding the allockit_report package
};

// Resolved once from /proc/self/exe; paths may name files that are missing (callers check).
const ToolPaths& tool_paths();

// Creates output directory `dir` and any missing parents, as `mkdir -p` (an existing directory is
// kept). Throws std::runtime_error naming `dir` and the reason when it cannot: a file in the way,
// no permission, a read-only file system.
void make_output_dir(const std::string& dir);

}  // namespace ak::trace
