// A program with one call site per allocation pattern `allockit advise` knows, for the advice
// round trip (advise_test.sh): groups that die together, fixed-size churn through operator new,
// temporaries, realloc growth, fixed-size blocks freed by another thread (a pool the per-thread
// replay cannot route), a leak (nothing to advise) and a dlopen'ed library's few allocations
// (not hot).
#include <dlfcn.h>

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

// 1000 live 40-byte objects made by new, 60000 replaced at random.
struct Pooled {
  long key;
  char value[32];
};
__attribute__((noinline)) Pooled* pooled_object() {
  return new Pooled{};  // SITE pool
}
void churn() {
  std::vector<Pooled*> live(1000);
  for (Pooled*& p : live) p = pooled_object();
  for (int i = 0; i < 60000; ++i) {
    Pooled*& p = live[next_random() % live.size()];
    delete p;
    p = pooled_object();
  }
  for (Pooled* p : live) delete p;
}

// 2000 blocks of 2 KiB, never freed.
__attribute__((noinline)) void leak() {
  for (int i = 0; i < 2000; ++i) {
    void* volatile p = std::malloc(2048);  // SITE leak
    (void)p;
  }
}

// zlib, loaded now, allocates its deflate state from inside libz: a few calls, not hot.
void library() {
  void* z = dlopen("libz.so.1", RTLD_NOW);
  using Compress = int (*)(unsigned char*, unsigned long*, const unsigned char*, unsigned long);
  auto compress = z ? reinterpret_cast<Compress>(dlsym(z, "compress")) : nullptr;
  for (int i = 0; compress && i < 20; ++i) {
    unsigned char out[256];
    unsigned long n = sizeof out;
    compress(out, &n, reinterpret_cast<const unsigned char*>("zzzzzzzz"), 8);
  }
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
  leak();
  library();
  return 0;
}
