// A deterministic stand-in for libFuzzer, so every compiler and sanitizer build runs the fuzz
// targets in `make test`: it feeds the seeds, then seeded random mutations of them (bit flips,
// byte sets, truncations, splices). Usage: fuzz_x [ITERATIONS] [SEED_FILES...]
//                                         fuzz_x --write-seeds DIR   (a corpus for libFuzzer)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
std::vector<std::vector<uint8_t>> fuzz_seeds();  // built-in seeds of each target

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--write-seeds") {
    int i = 0;
    for (const auto& s : fuzz_seeds()) {
      std::ofstream f(std::string(argv[2]) + "/seed" + std::to_string(i++), std::ios::binary);
      f.write(reinterpret_cast<const char*>(s.data()), static_cast<std::streamsize>(s.size()));
    }
    return 0;
  }
  long iterations = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 20000;
  std::vector<std::vector<uint8_t>> seeds = fuzz_seeds();
  for (int i = 2; i < argc; ++i) {
    std::ifstream f(argv[i], std::ios::binary);
    seeds.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  for (const auto& s : seeds) LLVMFuzzerTestOneInput(s.data(), s.size());
  std::mt19937_64 rng(12345);
  for (long it = 0; it < iterations; ++it) {
    std::vector<uint8_t> d = seeds[rng() % seeds.size()];
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !d.empty(); ++e) {
      size_t at = rng() % d.size();
      switch (rng() % 4) {
        case 0:
          d[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
          break;
        case 1:
          d[at] = static_cast<uint8_t>(rng());
          break;
        case 2:
          d.resize(at);
          break;
        case 3: {
          const auto& o = seeds[rng() % seeds.size()];
          if (!o.empty())
            d.insert(d.begin() + static_cast<long>(at), o.begin(),
                     o.begin() + static_cast<long>(rng() % o.size()));
          break;
        }
      }
    }
    LLVMFuzzerTestOneInput(d.data(), d.size());
  }
  std::printf("%ld mutated inputs, %zu seeds: no crash\n", iterations, seeds.size());
  return 0;
}
