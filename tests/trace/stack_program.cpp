// A program whose allocation call sites are known, for the call-stack round trip
// (stack_test.sh): each site below allocates a set number of blocks of one size, so
// `allockit top` must find exactly these sites, by function and line, with these counts. One of
// them is in a library the program dlopens after start (the module map must cover it).
// Usage: stack_program [crash]
#include <dlfcn.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

struct Node {
  Node* next;
  char payload[56];
};

// 1000 blocks of 48 bytes, each freed at once: temporaries.
__attribute__((noinline)) void churn_site() {
  for (int i = 0; i < 1000; ++i) {
    void* volatile p = std::malloc(48);  // SITE churn
    std::free(p);
  }
}

// 500 Nodes through operator new, all live at the peak: attributed here, not to libstdc++.
__attribute__((noinline)) Node* list_site() {
  Node* head = nullptr;
  for (int i = 0; i < 500; ++i) head = new Node{head, {}};  // SITE list
  return head;
}

// 200 strdup copies: attributed here, not to libc.
__attribute__((noinline)) void copy_site(std::vector<char*>& out) {
  for (int i = 0; i < 200; ++i)
    out.push_back(strdup("a string of thirty-one bytes..."));  // SITE copy
}

// 300 blocks of 4000 bytes on another thread, leaked.
__attribute__((noinline)) void thread_site() {
  for (int i = 0; i < 300; ++i) {
    void* volatile p = std::malloc(4000);  // SITE thread
    (void)p;
  }
}

int main(int argc, char** argv) {
  churn_site();
  Node* list = list_site();
  std::vector<char*> copies;
  copies.reserve(1000);
  copy_site(copies);
  std::thread(thread_site).join();
  // zlib, loaded now, allocates its deflate state through malloc from inside libz.
  if (void* z = dlopen("libz.so.1", RTLD_NOW)) {
    using Fn = unsigned long (*)(unsigned long);
    if (auto bound = reinterpret_cast<Fn>(dlsym(z, "compressBound")))
      std::printf("%lu\n", bound(10));
    using Compress = int (*)(unsigned char*, unsigned long*, const unsigned char*, unsigned long);
    if (auto compress = reinterpret_cast<Compress>(dlsym(z, "compress"))) {
      unsigned char out[256];
      unsigned long n = sizeof out;
      compress(out, &n, reinterpret_cast<const unsigned char*>("zzzzzzzz"), 8);
    }
  }
  if (argc > 1 && std::strcmp(argv[1], "crash") == 0) raise(SIGSEGV);
  for (char* c : copies) std::free(c);
  while (list) {
    Node* next = list->next;
    delete list;
    list = next;
  }
  return 0;
}
