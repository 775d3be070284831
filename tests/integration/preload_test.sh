#!/usr/bin/env bash
# Whole programs under LD_PRELOAD=liballockit.so: each must behave exactly as without it.
# Usage: preload_test.sh LIBALLOCKIT_SO  (run by ctest; exits non-zero on the first failure)
set -euo pipefail
lib=$(realpath "$1")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
run() { LD_PRELOAD="$lib" "$@"; }
step() { printf '== %s\n' "$*"; }

step "the library is really in use"
cat > probe.c <<'C'
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
  if (!dlsym(RTLD_DEFAULT, "ak_malloc")) { puts("liballockit not loaded"); return 1; }
  char* p = malloc(100); strcpy(p, "hello");
  p = realloc(p, 100000); if (strcmp(p, "hello")) return 2;
  void* a; if (posix_memalign(&a, 4096, 10) || ((unsigned long)a & 4095)) return 3;
  if (malloc_usable_size(p) < 100000) return 4;
  free(p); free(a); free(calloc(10, 10));
  puts("probe ok"); return 0;
}
C
cc -O1 probe.c -o probe -ldl
[ "$(run ./probe)" = "probe ok" ]

step "glibc's own names (__libc_malloc ...) are allockit's: a block from one name freed by the other"
cat > libc_names.c <<'C'
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
void* __libc_malloc(size_t); void __libc_free(void*); void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t); void* __libc_memalign(size_t, size_t);
void* __libc_valloc(size_t); void* __libc_pvalloc(size_t);
int main(void) {
  size_t (*usable)(void*) = (size_t (*)(void*))dlsym(RTLD_DEFAULT, "ak_malloc_usable_size");
  char* p = __libc_malloc(100); strcpy(p, "hello");
  p = realloc(p, 5000); if (strcmp(p, "hello") || usable(p) < 5000) return 1;
  free(p);
  p = malloc(50); p = __libc_realloc(p, 300000); if (usable(p) < 300000) return 2;
  __libc_free(p);
  int* z = __libc_calloc(1000, sizeof(int)); for (int i = 0; i < 1000; ++i) if (z[i]) return 3;
  free(z);
  void* a = __libc_memalign(256, 100); if ((unsigned long)a & 255 || usable(a) < 100) return 4;
  __libc_free(a);
  void* v = __libc_valloc(10); void* pv = __libc_pvalloc(10);
  if ((unsigned long)v & 4095 || (unsigned long)pv & 4095 || usable(pv) < 4096) return 5;
  free(v); __libc_free(pv);
  puts("libc names ok"); return 0;
}
C
cc -O1 libc_names.c -o libc_names -ldl
[ "$(run ./libc_names)" = "libc names ok" ]

step "glibc's introspection calls (mallinfo2, mallinfo, malloc_info, malloc_stats, mallopt) answer for allockit"
cat > introspect.c <<'C'
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
  char* volatile big = malloc(10 << 20); big[0] = 1;
  static void* small[10000];
  for (int i = 0; i < 10000; ++i) small[i] = memset(malloc(100), 1, 100);
  struct mallinfo2 m = mallinfo2();
  if (m.hblks < 1 || m.hblkhd < (10 << 20) || m.uordblks < 10000 * 100) return 1;
  if (m.arena != m.uordblks + m.fordblks) return 2;
  struct mallinfo mi = mallinfo();
  if (mi.hblks != (int)m.hblks || mi.uordblks < 10000 * 100) return 3;
  if (mallopt(M_ARENA_MAX, 2) != 1 || mallopt(M_MMAP_THRESHOLD, 1 << 20) != 1) return 4;
  if (mallopt(12345, 1) != 1 || mallopt(M_MXFAST, 161) != 0) return 5;  /* as glibc 2.36 */
  if (malloc_info(0, stdout) != 0) return 6;
  malloc_stats();
  for (int i = 0; i < 10000; ++i) free(small[i]);
  free(big);
  return 0;
}
C
cc -O1 -Wno-deprecated-declarations introspect.c -o introspect
run ./introspect >introspect.out 2>introspect.err
grep -q '<total type="mmap" count="1" size="1[0-9]\{7\}"/>' introspect.out
grep -q '^allockit: stats: large blocks 1 ' introspect.err

step "the library depends on libc alone; no thread at load, nor in a process caching little"
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
[ "$needed" = "libc.so.6 " ] || { echo "NEEDED: $needed (want libc.so.6 only)"; exit 1; }
cat > threads.c <<'C'
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static int threads(void) {
  int n = 0; DIR* d = opendir("/proc/self/task"); struct dirent* e;
  while ((e = readdir(d))) n += e->d_name[0] != '.';
  closedir(d); return n;
}
static void cache_a_block(size_t bytes) {
  char* volatile big = malloc(bytes);                       /* volatile: the pair is not elided */
  big[0] = 1; free(big);                                    /* a mapping goes to the cache */
}
int main(int argc, char** argv) {
  if (argc > 1 && argv[1][0] == 'l') {                      /* little: old, caching 300 KiB */
    usleep(100000); cache_a_block(300 << 10);
    int little = threads();
    cache_a_block(1 << 20);                                 /* 1.3 MiB cached: purger */
    printf("%d %d\n", little, threads());
    return 0;
  }
  void* p[64];
  for (int i = 0; i < 64; ++i) p[i] = malloc(100);          /* a short program's allocations */
  int at_start = threads();
  for (int i = 0; i < 64; ++i) free(p[i]);
  cache_a_block(8 << 20);                                   /* young, 8 MiB cached: no purger */
  int young = threads();
  if (argc > 1) cache_a_block(16 << 20);                    /* young, 24 MiB cached: purger */
  else { usleep(100000); cache_a_block(1 << 20); }          /* 100 ms old: purger */
  printf("%d %d %d\n", at_start, young, threads());
  return 0;
}
C
cc -O1 threads.c -o threads
[ "$(run ./threads)" = "1 1 2" ]
[ "$(run ./threads volume)" = "1 1 2" ]
[ "$(run ./threads little)" = "1 2" ]
[ "$(ALLOCKIT_BACKGROUND_PURGE=0 run ./threads)" = "1 1 1" ]
# A C program never loads the C++ runtime because of allockit.
[ -z "$(run env LD_DEBUG=libs ./threads 2>&1 | grep -E 'libstdc\+\+|libgcc_s|libm\.so')" ]

step "the writable globals but the tables and the hot page share one page with the GOT's end"
# .data and .bss must lie on the page where .got.plt ends (written at load and by lazy binding):
# each page more costs every process a page fault and every fork cycle a copy-on-write fault per
# side (docs/architecture.md, "Hot page and early data").
sections=$(readelf -SW "$lib" | sed 's/\[ */[/' | awk '$2 ~ /^\.(got\.plt|data|bss)$/ {print $2, $4, $6}')
[ "$(echo "$sections" | wc -l)" = 3 ] || { echo "sections: $sections"; exit 1; }
end_of() { read -r _ a n <<<"$(echo "$sections" | grep "^$1 ")"; echo $((0x$a + 0x$n - 1)); }
got_end=$(end_of '\.got\.plt')
bss_end=$(end_of '\.bss')
if [ $((got_end / 4096)) != $((bss_end / 4096)) ]; then
  printf 'writable globals span pages: .got.plt ends at 0x%x, .bss at 0x%x\n' "$got_end" "$bss_end"
  exit 1
fi

step "C++ operator new: bad_alloc, the new_handler, nothrow (through weak runtime references)"
cat > newops.cpp <<'CPP'
#include <cstdio>
#include <new>
static int calls = 0;
static void handler_then_give_up() { if (++calls == 2) std::set_new_handler(nullptr); }
static void handler_throws() { ++calls; throw std::bad_alloc(); }
int main() {
  const std::size_t huge = std::size_t(1) << 62;
  int ok = 0;
  try { (void)::operator new(huge); } catch (const std::bad_alloc&) { ok |= 1; }
  std::set_new_handler(handler_then_give_up);
  try { (void)::operator new[](huge, std::align_val_t(64)); } catch (const std::bad_alloc&) { ok |= 2; }
  if (calls == 2) ok |= 4;
  if (::operator new(huge, std::nothrow) == nullptr) ok |= 8;    /* no handler: plain null */
  calls = 0;
  std::set_new_handler(handler_throws);
  if (::operator new(huge, std::nothrow) == nullptr && calls == 1) ok |= 16;  /* caught */
  if (::operator new[](huge, std::align_val_t(32), std::nothrow) == nullptr && calls == 2) ok |= 32;
  calls = 0;
  std::set_new_handler(handler_then_give_up);  /* the plain form's handler loop */
  try { (void)::operator new(huge); } catch (const std::bad_alloc&) { if (calls == 2) ok |= 64; }
  std::set_new_handler(nullptr);
  int* p = new int(7); delete p;
  std::printf("%d\n", ok);
}
CPP
c++ -O1 newops.cpp -o newops
[ "$(run ./newops)" = "127" ]
# A C program whose operator new fails has no runtime to throw with: a clear message, an abort.
cat > cnew.c <<'C'
#include <stddef.h>
void* _Znwm(size_t);
int main(void) { return _Znwm((size_t)1 << 62) != 0; }
C
cc -O1 cnew.c -o cnew "$lib"  # linked: nothing else defines operator new here
if run ./cnew 2> cnew.err; then echo "operator new did not fail"; exit 1; fi
grep -q "operator new: out of memory" cnew.err

step "initialisation corners: before main, first call on a new thread, dynamic TLS of dlopen"
# A library whose thread-local array lives in dynamic TLS: each thread's first access makes
# glibc allocate its block inside __tls_get_addr, through the preloaded malloc.
cat > tlslib.c <<'C'
static __thread char big[100000];
int touch_tls(int v) { big[v % sizeof big] = (char)v; return big[v % sizeof big]; }
C
cat > init.c <<'C'
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static char* early;
__attribute__((constructor(101))) static void before_main(void) {
  early = strdup("allocated before main");
}
static int (*touch)(int);
static void* worker(void* arg) {
  long n = (long)arg;
  void* blocks[64];
  for (int i = 0; i < 64; ++i) blocks[i] = malloc(16 + 97 * i);  /* the thread's first calls */
  for (int i = 0; i < 64; ++i) free(blocks[i]);
  return (void*)(long)(touch((int)n) == (char)n);
}
int main(void) {
  if (!early || strcmp(early, "allocated before main")) return 1;
  void* lib = dlopen("./libtls.so", RTLD_NOW);
  if (!lib || !(touch = (int (*)(int))dlsym(lib, "touch_tls"))) return 2;
  pthread_t t[8];
  for (long i = 0; i < 8; ++i) pthread_create(&t[i], NULL, worker, (void*)(i + 1));
  for (int i = 0; i < 8; ++i) { void* ok; pthread_join(t[i], &ok); if (!ok) return 3; }
  free(early);
  dlclose(lib);
  puts("init ok");
  return 0;
}
C
cc -O1 -shared -fPIC tlslib.c -o libtls.so
cc -O1 init.c -o init -ldl -lpthread
[ "$(run ./init)" = "init ok" ]

step "threads joined as the purger becomes due: the join frees their stacks' TLS under glibc's lock"
# pthread_join frees exited threads' thread-local storage holding glibc's stack-cache lock; a
# purger thread created from that free waited for the lock forever (3 runs of 3 on this host).
cat > joins.c <<'C'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static void* churn(void* a) {
  unsigned s = (unsigned)(long)a; void* slot[512] = {0};
  for (int i = 0; i < 2000000; i++) {
    s = s * 1103515245 + 12345; int k = (s >> 8) % 512; free(slot[k]);
    slot[k] = malloc(8 + (s >> 16) % 256); ((char*)slot[k])[0] = 1;
  }
  for (int k = 0; k < 512; k++) free(slot[k]);
  return 0;
}
int main(void) {
  pthread_t t[8];
  for (long i = 0; i < 8; i++) pthread_create(&t[i], 0, churn, (void*)(i + 1));
  for (int i = 0; i < 8; i++) pthread_join(t[i], 0);
  puts("joined");
  return 0;
}
C
cc -O1 joins.c -o joins -lpthread
for i in 1 2 3; do [ "$(run timeout 60 ./joins)" = "joined" ]; done

step "the C compiler compiles a file"
printf '#include <stdio.h>\nint main(void){puts("built under allockit");return 0;}\n' > hello.c
run cc -O2 -Wall hello.c -o hello
[ "$(./hello)" = "built under allockit" ]
printf '#include <map>\n#include <string>\n#include <cstdio>\nint main(){std::map<int,std::string> m;for(int i=0;i<1000;++i)m[i]=std::to_string(i);std::printf("%%zu\\n",m.size());}\n' > m.cpp
run c++ -O2 m.cpp -o m
[ "$(run ./m)" = "1000" ]

step "git creates a repository, commits and logs"
run git init -q repo
(cd repo && echo one > a.txt && run git add a.txt &&
  run git -c user.name=t -c user.email=t@e commit -qm first &&
  echo two >> a.txt && run git -c user.name=t -c user.email=t@e commit -qam second &&
  [ "$(run git log --format=%s | tr '\n' ' ')" = "second first " ] &&
  run git gc -q && run git fsck --no-progress >/dev/null)

step "python3 runs a script"
cat > work.py <<'PY'
import json, re, hashlib, collections
d = {str(i): [j * j for j in range(i % 40)] for i in range(100000)}
blob = json.dumps(d)
assert json.loads(blob) == d
words = collections.Counter(re.findall(r"\d+", blob))
print(hashlib.sha256(blob.encode()).hexdigest()[:16], len(words))
PY
[ "$(run python3 work.py)" = "$(python3 work.py)" ]

step "a slice of python3's own test suite"
py=""
for cand in python3 /usr/bin/python3; do
  if command -v "$cand" >/dev/null && "$cand" -c 'import test.test_json' 2>/dev/null; then py=$cand; break; fi
done
if [ -n "$py" ]; then
  run "$py" -m test -q test_json test_list test_dict test_set test_re test_bisect test_heapq
else
  echo "SKIPPED: no python3 with its test package (Debian: libpython3.11-testsuite)"
fi

if command -v sqlite3 >/dev/null; then
  step "sqlite3 builds and queries a database"
  out=$(run sqlite3 db.sqlite "create table t(x integer, s text);
    with recursive c(x) as (select 1 union all select x+1 from c where x<50000)
    insert into t select x, hex(randomblob(20)) from c;
    create index i on t(s); select count(*), sum(x) from t;")
  [ "$out" = "50000|1250025000" ]
fi
step "the data relocated at load (RELRO) is one page: each page of it costs every process a fault"
read -r start size < <(readelf -lW "$lib" | awk '$1 == "GNU_RELRO" {print $3, $6}')
page=$(getconf PAGESIZE)
first=$((start / page))
last=$(((start + size - 1) / page))
[ "$first" = "$last" ] || { echo "RELRO spans pages $first..$last ($size bytes)"; exit 1; }
echo "all programs ran under allockit"
