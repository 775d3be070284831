// A program with one call site per allocation pattern `allockit advise` knows, for the advice
// round trip (advise_test.sh): groups that die together, fixed-size churn, temporaries, realloc
// growth, and fixed-size blocks freed by another thread (a pool the per-thread replay cannot
// route).
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

unsigned g_seed = 12345;
unsigned next_random() {
  g_seed = g_seed * 1103515245u + 12345u;
  return g_seed >> 8;
}

// 400 groups of 50 blocks of 24 to 216 bytes, each group freed whole before the next.
__attribute__((noinline)) void* group_node(size_t n) {
  return std::malloc(n);  // SITE groups
}
void groups() {
  std::vector<void*> g;
  for (int frame = 0; frame < 400; ++frame) {
    for (int i = 0; i < 50; ++i) g.push_back(group_node(24 + 8 * (next_random() % 25)));
    for (void* p : g) std::free(p);
    g.clear();
  }
}

// 1000 live 40-byte objects, 60000 replaced at random.
__attribute__((noinline)) void* pooled_object() {
  return std::malloc(40);  // SITE pool
}
void churn() {
  std::vector<void*> live(1000);
  for (void*& p : live) p = pooled_object();
  for (int i = 0; i < 60000; ++i) {
    void*& p = live[next_random() % live.size()];
    std::free(p);
    p = pooled_object();
  }
  for (void* p : live) std::free(p);
}

// 30000 scratch buffers of 64 to 1024 bytes, each freed before the next allocation.
__attribute__((noinline)) char* scratch(size_t n) {
  return static_cast<char*>(std::malloc(n));  // SITE temporaries
}
void temporaries() {
  for (int i = 0; i < 30000; ++i) {
    char* s = scratch(64 + 16 * (next_random() % 61));
    s[0] = 1;
    std::free(s);
  }
}

// 300 buffers grown by doubling to 64 KiB.
__attribute__((noinline)) void* grow(void* p, size_t n) {
  return std::realloc(p, n);  // SITE growth
}
void growth() {
  for (int i = 0; i < 300; ++i) {
    void* p = nullptr;
    for (size_t n = 64; n <= 65536; n *= 2) p = grow(p, n);
    std::free(p);
  }
}

// 20000 32-byte messages made here and freed by a consumer thread.
__attribute__((noinline)) void* message() {
  return std::malloc(32);  // SITE handoff
}
void handoff() {
  std::vector<void*> batch;
  for (int i = 0; i < 20000; ++i) batch.push_back(message());
  std::thread([&] {
    for (void* p : batch) std::free(p);
  }).join();
}

}  // namespace

int main() {
  groups();
  churn();
  temporaries();
  growth();
  handoff();
  return 0;
}
