// Built-in seeds for the fuzz targets: a small valid journal (raw and zstd blocks, two threads,
// every op; the zstd one with v2 stacks and a module snapshot) and small valid text traces
// (valgrind, text, heaptrack).
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "trace/journal.hpp"

std::vector<std::vector<uint8_t>> fuzz_seeds() {
  using namespace ak::trace;
  std::vector<std::vector<uint8_t>> seeds;
  for (bool compress : {false, true}) {
    std::string path = "/tmp/ak-fuzz-seed-" + std::to_string(getpid()) + ".akj";
    {
      JournalWriter w(path, {{"command", "seed"}}, compress);
      for (int i = 0; i < 40; ++i) {
        Event e;
        e.op = static_cast<Op>(i % kOpCount);
        e.time_ns = 100 + 10 * static_cast<uint64_t>(i);
        e.a = e.op == Op::kFree || is_realloc(e.op) ? 0x1000 + 0x40 * static_cast<uint64_t>(i - 1)
                                                    : 64;
        e.b = 32;
        e.c = 3;
        e.result = e.op == Op::kFree ? 0 : 0x1000 + 0x40 * static_cast<uint64_t>(i);
        e.duration_ns = 7;
        w.add(1 + static_cast<uint32_t>(i % 2), 500, e, compress ? 1 + i % 3 : 0);
      }
      if (compress) {
        const uint64_t frames[] = {0x401234, 0x401300, 0x7f0000001000};
        for (uint32_t id = 1; id <= 3; ++id) w.add_stack(id, frames, id);
        w.add_modules(90, {{0, 0x400000, 0x500000, 0, "\x01\x02\x03\x04", "/bin/seed"}});
      }
      w.finish();
    }
    std::ifstream f(path, std::ios::binary);
    seeds.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    unlink(path.c_str());
  }
  std::string vg =
      "--1-- malloc(120) = 0x10000000\n--1-- calloc(11,16) = 0x100000A0\n"
      "--1-- realloc(0x100000A0,128) = 0x100000B0\n--1-- memalign(al 64, size 256) = "
      "0x100000C0\n--1-- free(0x10000000)\n";
  std::string text = "a 64 0x1000 1 100\na 32 0x2000 2 150\nf 0x1000 2 200\n";
  seeds.emplace_back(vg.begin(), vg.end());
  std::string heaptrack =
      "v 10400 3\nX prog\ns 4 prog\ns 4 main\ns 6 main.c\ni 401000 1 2 3 a\nt 1 0\n"
      "i 7f0000001000 1 2 3 b 2 3 c\nt 2 1\na 40 1\na 8 2\n+ 0\nc a\n+ 1\n- 0\nR 1000\n";
  seeds.emplace_back(text.begin(), text.end());
  seeds.emplace_back(heaptrack.begin(), heaptrack.end());
  return seeds;
}
