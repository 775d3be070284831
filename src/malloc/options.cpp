// ALLOCKIT_* options (options.hpp): parsed with getenv and a hand-written number parser, so the
// library can read them while it is being loaded, before anything else could allocate.
#include "malloc/options.hpp"

#include <cstdlib>

#include "core/core.hpp"

namespace ak::detail {
namespace {

void warn(const char* name, const char* value, const char* why) {
  Message().str("allockit: ignoring ").str(name).str("=").str(value).str(": ").str(why).print();
}

void parse_flag(const char* name, bool* out) {
  const char* v = std::getenv(name);
  if (v == nullptr) return;
  if ((v[0] == '0' || v[0] == '1') && v[1] == 0)
    *out = v[0] == '1';
  else
    warn(name, v, "expected 0 or 1");
}

void parse_level(const char* name, unsigned max, unsigned* out) {
  const char* v = std::getenv(name);
  if (v == nullptr) return;
  if (v[0] >= '0' && unsigned(v[0] - '0') <= max && v[1] == 0)
    *out = unsigned(v[0] - '0');
  else
    warn(name, v, max == 2 ? "expected 0, 1 or 2" : "expected a digit");
}

void parse_ms(const char* name, std::uint64_t max, std::uint64_t* out) {
  const char* v = std::getenv(name);
  if (v == nullptr) return;
  std::uint64_t n = 0;
  const char* p = v;
  for (; *p >= '0' && *p <= '9'; ++p) {
    n = n * 10 + std::uint64_t(*p - '0');
    if (n > max) break;
  }
  if (p == v || *p != 0 || n > max) {
    warn(name, v, "expected milliseconds from 0 to 3600000");
    return;
  }
  *out = n;
}

Options parse() noexcept {
  Options o;
  parse_ms("ALLOCKIT_PURGE_DELAY_MS", 3'600'000, &o.purge_delay_ms);
  parse_flag("ALLOCKIT_BACKGROUND_PURGE", &o.background_purge);
  parse_flag("ALLOCKIT_STATS", &o.stats_at_exit);
  parse_flag("ALLOCKIT_VERBOSE", &o.verbose);
  parse_level("ALLOCKIT_GUARD_FREED", 2, &o.guard_freed);
  return o;
}

constinit Options g_options;  // defaults until load_options() runs

}  // namespace

const Options& options() noexcept {
  return g_options;
}

void load_options() noexcept {
  g_options = parse();
}

}  // namespace ak::detail
