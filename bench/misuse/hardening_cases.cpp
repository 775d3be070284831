// The kinds of heap bug an allocator-hardening suite checks, one per run, plus valid programs
// that a hardened allocator must not break. `hardening_cases list` prints
// "name<TAB>kind<TAB>what" lines (kind: `misuse`, `access` or `valid`); `hardening_cases NAME`
// runs one against whatever malloc the process has (LD_PRELOAD picks it).
//
// - misuse: a bad pointer or size handed to the allocator. Detected when the allocator stops the
//   process with its own report (SIGABRT); a SIGSEGV is a crash, not a detection.
// - access: the program itself reads or writes memory it does not own (past a block, after a
//   free, through malloc(0)). Detected by a report or by a fault, as a guard page faults.
// - valid: must exit 0.
// Exit 0 from a misuse or access case means the bug passed silently; exit 3 means the case could
// not set itself up (no memory).
//
// Built at -O0 and called through volatile function pointers, so the compiler neither drops nor
// reorders the bugs. Blocks called "large" are 256 KiB, above the 128 KiB where glibc maps each
// block by itself.
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cerrno>
#include <initializer_list>
#include <new>

namespace {

void* (*volatile malloc_)(size_t) = malloc;
void* (*volatile calloc_)(size_t, size_t) = calloc;
void* (*volatile realloc_)(void*, size_t) = realloc;
void (*volatile free_)(void*) = free;
size_t (*volatile usable_)(void*) = malloc_usable_size;

constexpr size_t kLarge = 256 * 1024;

char* must(void* p) {
  if (!p) exit(3);
  return static_cast<char*>(p);
}

struct Big {
  uint64_t a, b, c, d;
};
struct alignas(64) Aligned {
  char x[24];
};
struct alignas(64) AlignedLarge {
  char x[kLarge];
};

// --- misuse: bad pointers and sizes --------------------------------------------------------

int double_free_small() {
  char* p = must(malloc_(16));
  free_(p);
  free_(p);
  return 0;
}
int double_free_small_delayed() {
  char* p = must(malloc_(16));
  char* q = must(malloc_(16));
  free_(p);
  free_(q);
  free_(p);
  return 0;
}
int double_free_large() {
  char* p = must(malloc_(kLarge));
  free_(p);
  free_(p);
  return 0;
}
int double_free_large_delayed() {
  char* p = must(malloc_(kLarge));
  char* q = must(malloc_(kLarge));
  free_(p);
  free_(q);
  free_(p);
  return 0;
}
int unaligned_free_small() {
  free_(must(malloc_(16)) + 1);
  return 0;
}
int unaligned_free_large() {
  free_(must(malloc_(kLarge)) + 1);
  return 0;
}
int free_unused_small_near() {  // an address in a small-block region never handed out
  free_(must(malloc_(16)) + 16 * 1024);
  return 0;
}
int free_unused_small_far() {
  free_(must(malloc_(16)) + (1L << 30));
  return 0;
}
int free_protected_mapping() {
  void* m = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 3;
  free_(m);
  return 0;
}
int free_unprotected_mapping() {
  void* m = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 3;
  free_(m);
  return 0;
}
int free_uninitialised() {
  free_(reinterpret_cast<void*>(1));
  return 0;
}
int realloc_uninitialised() {
  (void)realloc_(reinterpret_cast<void*>(1), 64);
  return 0;
}
int usable_size_uninitialised() {
  (void)usable_(reinterpret_cast<void*>(1));
  return 0;
}
int usable_size_freed_small() {
  char* p = must(malloc_(16));
  free_(p);
  (void)usable_(p);
  return 0;
}
int usable_size_unused_small() {
  (void)usable_(must(malloc_(16)) + 16 * 1024);
  return 0;
}
int usable_size_unaligned_small() {
  (void)usable_(must(malloc_(16)) + 1);
  return 0;
}
int sized_delete_wrong_size() {  // a char deleted as a 32-byte struct
  void* p = new char;
  delete static_cast<Big*>(p);
  return 0;
}
int aligned_sized_delete_wrong_size_small() {
  auto* p = new Aligned;
  operator delete(p, sizeof(Aligned) + 64, std::align_val_t(alignof(Aligned)));
  return 0;
}
int aligned_sized_delete_wrong_size_large() {
  auto* p = new AlignedLarge;
  operator delete(p, sizeof(AlignedLarge) + 4096, std::align_val_t(alignof(AlignedLarge)));
  return 0;
}

// --- access: the program touches memory it does not own ------------------------------------

int overflow_small_1() {
  char* p = must(malloc_(8));
  p[usable_(p)] = 1;
  free_(p);
  return 0;
}
int overflow_small_8() {
  char* p = must(malloc_(8));
  memset(p + usable_(p), 1, 8);
  free_(p);
  return 0;
}
int overflow_large_1() {
  char* p = must(malloc_(kLarge));
  p[usable_(p)] = 1;
  free_(p);
  return 0;
}
int overflow_large_8() {
  char* p = must(malloc_(kLarge));
  memset(p + usable_(p), 1, 8);
  free_(p);
  return 0;
}
void churn(size_t size, int rounds) {  // gives a freed block every chance to be handed out again
  for (int i = 0; i < rounds; ++i) free_(must(malloc_(size)));
}
int write_after_free_small() {
  char* p = must(malloc_(128));
  free_(p);
  p[65] = 'a';
  churn(128, 100000);
  return 0;
}
int write_after_free_small_reuse() {
  char* p = must(malloc_(128));
  free_(p);
  char* volatile q = must(malloc_(128));
  (void)q;
  p[65] = 'a';
  churn(128, 100000);
  return 0;
}
int read_after_free_large() {
  char* p = must(malloc_(kLarge));
  memset(p, 'a', kLarge);
  free_(p);
  volatile char sum = 0;
  for (size_t i = 0; i < kLarge; ++i) sum = static_cast<char>(sum + p[i]);
  return 0;
}
int write_after_free_large() {
  char* p = must(malloc_(kLarge));
  free_(p);
  p[64 * 1024 + 1] = 'a';
  return 0;
}
int write_after_free_large_reuse() {
  char* p = must(malloc_(kLarge));
  free_(p);
  char* volatile q = must(malloc_(kLarge));
  (void)q;
  p[64 * 1024 + 1] = 'a';
  return 0;
}
int read_zero_size() {
  char* p = must(malloc_(0));
  printf("%d\n", *reinterpret_cast<volatile char*>(p));
  return 0;
}
int write_zero_size() {
  char* p = must(malloc_(0));
  *reinterpret_cast<volatile char*>(p) = 5;
  return 0;
}

// --- valid programs ------------------------------------------------------------------------

int fail(const char* what) {
  fprintf(stderr, "valid program failed: %s\n", what);
  return 1;
}
int sized_delete_small() {
  auto* p = new Big{};
  delete p;
  void* q = operator new(24);
  operator delete(q, 24);
  return 0;
}
int sized_delete_large() {
  void* p = operator new(kLarge);
  operator delete(p, kLarge);
  return 0;
}
int aligned_sized_delete_small() {
  auto* p = new Aligned;
  delete p;
  return 0;
}
int aligned_sized_delete_min_align() {
  void* p = operator new(24, std::align_val_t(8));
  operator delete(p, 24, std::align_val_t(8));
  return 0;
}
int aligned_sized_delete_large() {
  auto* p = new AlignedLarge;
  delete p;
  return 0;
}
int impossibly_large_malloc() {
  errno = 0;
  if (malloc_(SIZE_MAX - 4096) != nullptr) return fail("malloc(SIZE_MAX - 4096) returned memory");
  return errno == ENOMEM ? 0 : fail("errno is not ENOMEM");
}
int impossibly_large_realloc() {
  char* p = must(malloc_(64));
  memset(p, 7, 64);
  errno = 0;
  if (realloc_(p, SIZE_MAX / 2) != nullptr) return fail("realloc(SIZE_MAX / 2) returned memory");
  if (errno != ENOMEM || p[63] != 7) return fail("failed realloc lost the block");
  free_(p);
  return 0;
}
int calloc_overflow() {
  errno = 0;
  if (calloc_(SIZE_MAX / 2, 3) != nullptr) return fail("calloc product overflow returned memory");
  return errno == ENOMEM ? 0 : fail("errno is not ENOMEM");
}
int calloc_zeroed_after_reuse() {
  for (size_t size : {24ul, 1000ul, kLarge, 4ul << 20}) {
    char* p = must(malloc_(size));
    memset(p, 0xff, size);
    free_(p);
    char* q = must(calloc_(1, size));
    for (size_t i = 0; i < size; ++i)
      if (q[i]) return fail("calloc returned a non-zero byte");
    free_(q);
  }
  return 0;
}
int read_uninitialised() {
  volatile char sum = 0;
  for (size_t size : {16ul, kLarge}) {
    char* p = must(malloc_(size));
    for (size_t i = 0; i < size; ++i) sum = static_cast<char>(sum + p[i]);
    free_(p);
  }
  return 0;
}
int realloc_chain() {  // realloc(NULL) starts it; growth and shrinking keep the bytes
  char* p = static_cast<char*>(realloc_(nullptr, 16));
  size_t n = 16;
  memset(p, 1, n);
  for (size_t next : {100ul, 5000ul, kLarge, 3ul << 20, 1000ul, 64ul << 20, 8ul}) {
    char* q = must(realloc_(p, next));
    for (size_t i = 0; i < (next < n ? next : n); ++i)
      if (q[i] != 1) return fail("realloc lost a byte");
    if (next > n) memset(q + n, 1, next - n);
    p = q;
    n = next;
  }
  free_(p);
  return 0;
}
int large_array_growth() {
  size_t n = 4096;
  auto* a = reinterpret_cast<uint32_t*>(must(malloc_(n * 4)));
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<uint32_t>(i);
  while (n < (32u << 20)) {
    a = reinterpret_cast<uint32_t*>(must(realloc_(a, n * 8)));
    for (size_t i = n; i < 2 * n; ++i) a[i] = static_cast<uint32_t>(i);
    n *= 2;
  }
  for (size_t i = 0; i < n; i += 997)
    if (a[i] != i) return fail("array growth lost an element");
  free_(a);
  return 0;
}
int malloc_zero() {  // distinct, freeable, not handed out again while live
  char* a = must(malloc_(0));
  char* b = must(malloc_(0));
  if (a == b) return fail("two live malloc(0) share an address");
  for (int i = 0; i < 512; ++i) {
    char* q = must(malloc_(64));
    if (q == a || q == b) return fail("a live malloc(0) pointer was handed out again");
    free_(q);
  }
  free_(a);
  free_(b);
  return 0;
}
int usable_size_live() {
  for (size_t size : {1ul, 24ul, 1000ul, 20000ul, kLarge, 3ul << 20}) {
    char* p = must(malloc_(size));
    size_t u = usable_(p);
    if (u < size) return fail("malloc_usable_size below the request");
    memset(p, 1, u);  // all of it is the program's
    free_(p);
  }
  return 0;
}
int aligned_allocations() {
  void* p = nullptr;
  if (posix_memalign(&p, 24, 64) != EINVAL) return fail("posix_memalign accepted alignment 24");
  for (size_t align : {16ul, 64ul, 4096ul, 65536ul}) {
    if (posix_memalign(&p, align, 100) != 0) return fail("posix_memalign failed");
    if (reinterpret_cast<uintptr_t>(p) % align) return fail("posix_memalign misaligned");
    free_(p);
  }
  return 0;
}

struct Case {
  const char* name;
  const char* kind;
  int (*run)();
  const char* what;
};

constexpr Case kCases[] = {
    {"double_free_small", "misuse", double_free_small, "free a 16-byte block twice"},
    {"double_free_small_delayed", "misuse", double_free_small_delayed,
     "free A, free B, free A (16 B)"},
    {"double_free_large", "misuse", double_free_large, "free a 256 KiB block twice"},
    {"double_free_large_delayed", "misuse", double_free_large_delayed,
     "free A, free B, free A (256 KiB)"},
    {"unaligned_free_small", "misuse", unaligned_free_small, "free a small block's address + 1"},
    {"unaligned_free_large", "misuse", unaligned_free_large, "free a large block's address + 1"},
    {"free_unused_small_near", "misuse", free_unused_small_near,
     "free 16 KiB past a small block: inside the small-block region, never handed out"},
    {"free_unused_small_far", "misuse", free_unused_small_far, "free 1 GiB past a small block"},
    {"free_protected_mapping", "misuse", free_protected_mapping,
     "free a PROT_NONE page of the program's"},
    {"free_unprotected_mapping", "misuse", free_unprotected_mapping,
     "free a writable page of the program's"},
    {"free_uninitialised", "misuse", free_uninitialised, "free((void*)1)"},
    {"realloc_uninitialised", "misuse", realloc_uninitialised, "realloc((void*)1, 64)"},
    {"usable_size_uninitialised", "misuse", usable_size_uninitialised,
     "malloc_usable_size((void*)1)"},
    {"usable_size_freed_small", "misuse", usable_size_freed_small,
     "malloc_usable_size of a freed small block"},
    {"usable_size_unused_small", "misuse", usable_size_unused_small,
     "malloc_usable_size 16 KiB past a small block"},
    {"usable_size_unaligned_small", "misuse", usable_size_unaligned_small,
     "malloc_usable_size of a small block's address + 1"},
    {"sized_delete_wrong_size", "misuse", sized_delete_wrong_size,
     "new char, deleted as a 32-byte struct"},
    {"aligned_sized_delete_wrong_size_small", "misuse", aligned_sized_delete_wrong_size_small,
     "aligned sized delete, size 64 too big (small)"},
    {"aligned_sized_delete_wrong_size_large", "misuse", aligned_sized_delete_wrong_size_large,
     "aligned sized delete, size 4 KiB too big (large)"},
    {"overflow_small_1", "access", overflow_small_1, "write 1 byte past malloc_usable_size (8 B)"},
    {"overflow_small_8", "access", overflow_small_8, "write 8 bytes past malloc_usable_size (8 B)"},
    {"overflow_large_1", "access", overflow_large_1,
     "write 1 byte past malloc_usable_size (256 KiB)"},
    {"overflow_large_8", "access", overflow_large_8,
     "write 8 bytes past malloc_usable_size (256 KiB)"},
    {"write_after_free_small", "access", write_after_free_small,
     "write into a freed 128-byte block"},
    {"write_after_free_small_reuse", "access", write_after_free_small_reuse,
     "write into a freed 128-byte block after one more malloc"},
    {"read_after_free_large", "access", read_after_free_large, "read a freed 256 KiB block"},
    {"write_after_free_large", "access", write_after_free_large,
     "write into a freed 256 KiB block"},
    {"write_after_free_large_reuse", "access", write_after_free_large_reuse,
     "write into a freed 256 KiB block after one more malloc"},
    {"read_zero_size", "access", read_zero_size, "read through malloc(0)"},
    {"write_zero_size", "access", write_zero_size, "write through malloc(0)"},
    {"sized_delete_small", "valid", sized_delete_small, "sized delete of the right size (small)"},
    {"sized_delete_large", "valid", sized_delete_large, "sized delete of the right size (large)"},
    {"aligned_sized_delete_small", "valid", aligned_sized_delete_small,
     "aligned sized delete (small)"},
    {"aligned_sized_delete_min_align", "valid", aligned_sized_delete_min_align,
     "aligned sized delete at alignment 8"},
    {"aligned_sized_delete_large", "valid", aligned_sized_delete_large,
     "aligned sized delete (large)"},
    {"impossibly_large_malloc", "valid", impossibly_large_malloc,
     "malloc(SIZE_MAX - 4096): NULL, ENOMEM"},
    {"impossibly_large_realloc", "valid", impossibly_large_realloc,
     "failed realloc keeps the block"},
    {"calloc_overflow", "valid", calloc_overflow, "calloc product overflow: NULL, ENOMEM"},
    {"calloc_zeroed_after_reuse", "valid", calloc_zeroed_after_reuse,
     "calloc of reused memory is zero"},
    {"read_uninitialised", "valid", read_uninitialised, "read fresh blocks before writing them"},
    {"realloc_chain", "valid", realloc_chain, "realloc from NULL through 64 MiB and back"},
    {"large_array_growth", "valid", large_array_growth, "an array doubled by realloc to 128 MiB"},
    {"malloc_zero", "valid", malloc_zero, "malloc(0): distinct, freeable, not reused while live"},
    {"usable_size_live", "valid", usable_size_live,
     "malloc_usable_size of live blocks, all writable"},
    {"aligned_allocations", "valid", aligned_allocations, "posix_memalign: EINVAL and alignments"},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: hardening_cases list | NAME\n");
    return 2;
  }
  for (const Case& c : kCases) {
    if (strcmp(argv[1], "list") == 0)
      printf("%s\t%s\t%s\n", c.name, c.kind, c.what);
    else if (strcmp(argv[1], c.name) == 0)
      return c.run();
  }
  if (strcmp(argv[1], "list") == 0) return 0;
  fprintf(stderr, "hardening_cases: no case named %s\n", argv[1]);
  return 2;
}
