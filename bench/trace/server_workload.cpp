// A request server in miniature, for `allockit advise` (bench/run_trace_bench.py): 4 worker
// threads each serve 60,000 requests; a request object of one size is made and destroyed per
// request while a few hundred stay in flight (fixed-size churn: a pool), each request formats its
// reply in a scratch buffer freed before the next allocation (temporaries), and a per-thread
// session table of long-lived entries grows by realloc (growth: a reserve).
// Usage: server_workload [REQUESTS_PER_THREAD]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

struct Request {
  long id;
  char header[88];
};

__attribute__((noinline)) Request* accept_request(long id) {
  auto* r = new Request{id, {}};
  std::snprintf(r->header, sizeof r->header, "GET /item/%ld", id);
  return r;
}

__attribute__((noinline)) size_t reply(const Request& r) {
  const size_t n = 256 + static_cast<size_t>(r.id % 7) * 128;
  char* buf = static_cast<char*>(std::malloc(n));
  const int len = std::snprintf(buf, n, "200 OK %s", r.header);
  std::free(buf);
  return static_cast<size_t>(len);
}

void serve(long requests, unsigned seed, size_t* out) {
  std::vector<Request*> in_flight(300, nullptr);
  long* sessions = nullptr;
  size_t cap = 0, used = 0, total = 0;
  for (long i = 0; i < requests; ++i) {
    seed = seed * 1103515245u + 12345u;
    Request*& slot = in_flight[(seed >> 8) % in_flight.size()];
    if (slot) {
      total += reply(*slot);
      delete slot;
    }
    slot = accept_request(i);
    if (i % 64 == 0) {
      if (used == cap) {
        cap = cap ? cap * 2 : 16;
        sessions = static_cast<long*>(std::realloc(sessions, cap * sizeof *sessions));
      }
      sessions[used++] = i;
    }
  }
  for (Request* r : in_flight) delete r;
  std::free(sessions);
  *out = total;
}

}  // namespace

int main(int argc, char** argv) {
  const long requests = argc > 1 ? std::atol(argv[1]) : 60000;
  std::vector<std::thread> workers;
  std::vector<size_t> totals(4);
  for (unsigned t = 0; t < 4; ++t) workers.emplace_back(serve, requests, 11 + t, &totals[t]);
  for (auto& w : workers) w.join();
  std::printf("%zu\n", totals[0] + totals[1] + totals[2] + totals[3]);
  return 0;
}
