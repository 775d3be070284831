// Fuzz target: any text given to the valgrind, text and heaptrack importers ends in a journal
// (whose call-site table, for heaptrack's stacks, builds) or a std::runtime_error naming the
// line, never a crash.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "trace/convert.hpp"
#include "trace/sites.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int in = memfd_create("fuzz-in", 0);
  static int out = memfd_create("fuzz-out", 0);
  if (in < 0 || out < 0) return 0;
  if (ftruncate(in, 0) != 0 || pwrite(in, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  std::string in_path = "/proc/self/fd/" + std::to_string(in);
  std::string out_path = "/proc/self/fd/" + std::to_string(out);
  for (int format = 0; format < 3; ++format) {
    try {
      if (format == 0)
        ak::trace::import_valgrind(in_path, out_path);
      else if (format == 1)
        ak::trace::import_text(in_path, out_path);
      else
        ak::trace::import_heaptrack(in_path, out_path);
      const ak::trace::Trace t = ak::trace::load_trace(out_path);
      if (!t.stacks.empty()) {
        ak::trace::Symbolizer named(std::vector<ak::trace::Module>{}, {}, t.names);
        (void)ak::trace::top_sites(t, ak::trace::resolve(t), named, {});
      }
    } catch (const std::runtime_error&) {
    }
  }
  return 0;
}
