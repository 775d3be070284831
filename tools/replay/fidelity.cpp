// Fidelity of a replay to the recorded memory (see fidelity.hpp).
#include "replay/fidelity.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "trace/format.hpp"
#include "trace/json.hpp"
#include "trace/stats.hpp"

namespace ak::replay {

namespace {

// The path a library resolves to, or the path itself when it does not exist.
std::string real_path(const std::string& p) {
  char* r = realpath(p.c_str(), nullptr);
  if (!r) return p;
  std::string out = r;
  std::free(r);
  return out;
}

// The library path of a journal's `allocator` meta ("PATH (glibc 2.36)").
std::string library_of(const std::string& recorded) {
  return recorded.substr(0, recorded.find(" ("));
}

bool is_glibc(const std::string& lib) {
  const std::string base = lib.substr(lib.rfind('/') + 1);
  return base.rfind("libc.so", 0) == 0 || base.rfind("libc-", 0) == 0;
}

// The curve's value at `x` of its span (0..1): the last point at or before it.
uint64_t at_fraction(const Curve& c, double x) {
  const double t = c.front().first + x * (c.back().first - c.front().first);
  auto it =
      std::upper_bound(c.begin(), c.end(), t,
                       [](double v, const std::pair<double, uint64_t>& p) { return v < p.first; });
  return it == c.begin() ? c.front().second : std::prev(it)->second;
}

uint64_t peak_of(const Curve& c) {
  uint64_t m = 0;
  for (const auto& p : c) m = std::max(m, p.second);
  return m;
}

}  // namespace

Curve recorded_curve(const std::vector<trace::RssSample>& rss) {
  Curve c;
  if (rss.empty()) return c;
  for (const auto& r : rss)
    c.emplace_back(static_cast<double>(r.time_ns - rss.front().time_ns) * 1e-6,
                   trace::heap_anon(r, rss.front()));
  return c;
}

Curve read_rss_csv(const std::string& path) {
  Curve c;
  std::ifstream f(path);
  double ms;
  char comma;
  unsigned long long bytes;
  while (f >> ms >> comma >> bytes) c.emplace_back(ms, bytes);
  return c;
}

Fidelity measure_fidelity(const std::string& recorded_allocator, const Curve& recorded,
                          const std::vector<ReplayResult>& results, const std::string& dir) {
  Fidelity f;
  if (recorded.empty()) return f;
  f.state = Fidelity::State::kNotReplayed;
  const std::string lib = library_of(recorded_allocator);
  const ReplayResult* match = nullptr;
  for (const auto& r : results)
    if (r.ok && (r.allocator.preload.empty() ? is_glibc(lib)
                                             : real_path(r.allocator.preload) == real_path(lib)))
      match = &r;
  if (!match) return f;
  const Curve replayed = read_rss_csv(dir + "/" + match->allocator.name + "/rss.csv");
  if (replayed.empty()) return f;
  f.state = Fidelity::State::kMeasured;
  f.allocator = match->allocator.name;
  f.recorded_peak = peak_of(recorded);
  // The worker's peak also counts one between its samples (the kernel's high-water mark).
  f.replayed_peak = std::max(peak_of(replayed), match->peak_rss);
  f.ratio = f.recorded_peak
                ? static_cast<double>(f.replayed_peak) / static_cast<double>(f.recorded_peak)
                : 0;
  constexpr int kPoints = 200;
  for (int i = 0; i <= kPoints; ++i) {
    const double x = static_cast<double>(i) / kPoints;
    const uint64_t a = at_fraction(recorded, x), b = at_fraction(replayed, x);
    f.largest_gap = std::max(f.largest_gap, a > b ? a - b : b - a);
  }
  return f;
}

std::string fidelity_line(const Fidelity& f, const std::string& recorded_allocator) {
  switch (f.state) {
    case Fidelity::State::kUnknown:
      return "Fidelity: unknown (the journal has no memory samples: an import, or a journal "
             "from an older recorder)\n";
    case Fidelity::State::kNotReplayed:
      return "Fidelity: not measured (the recorded allocator, " + library_of(recorded_allocator) +
             ", was not among those replayed)\n";
    case Fidelity::State::kMeasured:
      break;
  }
  char b[512];
  std::snprintf(b, sizeof b,
                "Fidelity (%s, the recorded allocator): peak heap RssAnon recorded %s, replayed "
                "%s (%.2fx); largest gap between the two curves %s (each run's time scaled to "
                "its length)\n",
                f.allocator.c_str(), trace::mib(f.recorded_peak).c_str(),
                trace::mib(f.replayed_peak).c_str(), f.ratio, trace::mib(f.largest_gap).c_str());
  return b;
}

std::string fidelity_json(const Fidelity& f) {
  const char* state = f.state == Fidelity::State::kMeasured      ? "measured"
                      : f.state == Fidelity::State::kNotReplayed ? "not_replayed"
                                                                 : "unknown";
  return std::string("{\"state\": ") + trace::json_str(state) +
         ", \"allocator\": " + trace::json_str(f.allocator) +
         ", \"recorded_peak_bytes\": " + std::to_string(f.recorded_peak) +
         ", \"replayed_peak_bytes\": " + std::to_string(f.replayed_peak) +
         ", \"ratio\": " + trace::json_num(f.ratio) +
         ", \"largest_gap_bytes\": " + std::to_string(f.largest_gap) + "}";
}

}  // namespace ak::replay
