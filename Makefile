# Front door to the CMake build. `make` builds build/ (release with debug info); `make test` runs
# the test suite in three variants: release, debug+ASan+UBSan (with AK_DEBUG checks), and TSan.
# `make demo` runs the side-by-side pool, arena and malloc benchmarks and prints the ratio tables.
BUILD      ?= build
JOBS       ?= $(shell nproc)
CMAKE_GEN  := -G Ninja
PY         ?= python3

PREFIX     ?= /usr/local

# `make` alone builds (deps, defined first, is only its first step).
.DEFAULT_GOAL := all

.PHONY: all deps install package test test-release test-asan test-tsan test-tsan-release fuzz soak demo demo-trace bench bench-malloc bench-rss-baseline bench-grid bench-misuse bench-programs \
        bench-trace format format-check clean
FUZZ_SECONDS ?= 10

# What a fresh Debian machine lacks (apt-get as root or through sudo); silent when nothing is.
deps:
	@scripts/install-deps.sh

all: deps
	cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j $(JOBS)

# Everything a user links or runs, under PREFIX (docs/using.md); the Debian package, in build/.
install: all
	cmake --install $(BUILD) --prefix $(PREFIX)

package: all
	cd $(BUILD) && cpack -G DEB

test: format-check test-release test-asan test-tsan test-tsan-release fuzz

test-release: all
	cd $(BUILD) && ctest -j $(JOBS) --output-on-failure

test-asan: deps
	cmake -S . -B build-asan $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DAK_DEBUG=ON -DAK_SANITIZE=address
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest -j $(JOBS) --output-on-failure

test-tsan: deps
	cmake -S . -B build-tsan $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAK_DEBUG=ON -DAK_SANITIZE=thread
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest -j $(JOBS) --output-on-failure

# TSan once more without AK_DEBUG: the shipped fast paths (per-thread bins holding other heaps'
# blocks, remote batches) rather than the checked slabs, which always take the slow path.
test-tsan-release: deps
	cmake -S . -B build-tsan-release $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAK_DEBUG=OFF -DAK_SANITIZE=thread
	cmake --build build-tsan-release -j $(JOBS)
	cd build-tsan-release && TSAN_OPTIONS=halt_on_error=1 ctest -j $(JOBS) --output-on-failure

# libFuzzer (clang) on every journal and text reader, FUZZ_SECONDS each (CI: a short pass).
fuzz: deps
	cmake -S . -B build-fuzz $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAK_FUZZ=ON \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
	cmake --build build-fuzz -j $(JOBS) --target libfuzzer_journal libfuzzer_import fuzz_journal fuzz_import
	for t in journal import; do \
	  mkdir -p build-fuzz/corpus-$$t && build-fuzz/tests/fuzz_$$t --write-seeds build-fuzz/corpus-$$t && \
	  build-fuzz/tests/libfuzzer_$$t -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -print_final_stats=1 \
	    build-fuzz/corpus-$$t > build-fuzz/fuzz-$$t.log 2>&1; rc=$$?; \
	  tail -5 build-fuzz/fuzz-$$t.log; [ $$rc -eq 0 ] || { echo "fuzz $$t failed: build-fuzz/fuzz-$$t.log"; exit 1; }; \
	done

# Long runs of the randomized and multi-threaded stress tests (ALLOCKIT_TEST_SOAK times their
# default size) in release and under TSan, the real-program LD_PRELOAD runs, and the churning
# workloads of the standard suite run again and again under liballockit (bench/soak_workloads.py:
# stops at the first failed run and keeps its core), and allockit built by a toolchain running
# under liballockit, whose machine code must match a build without it
# (tests/integration/self_build_test.sh, about four minutes). Not part of
# `make test`; CI may call it with a time bound, e.g. `timeout 1800 make soak SOAK=20`.
SOAK ?= 20
SOAK_TESTS := CrossThread|MallocStress|Differential|ArenaModel|SharedArena|PreloadRealPrograms
soak: all
	cmake -S . -B build-tsan $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAK_DEBUG=ON -DAK_SANITIZE=thread
	cmake --build build-tsan -j $(JOBS)
	cd $(BUILD) && ALLOCKIT_TEST_SOAK=$(SOAK) ctest -R '$(SOAK_TESTS)' --output-on-failure
	cd build-tsan && ALLOCKIT_TEST_SOAK=$(SOAK) TSAN_OPTIONS=halt_on_error=1 \
	  ctest -R '$(SOAK_TESTS)' --output-on-failure
	python3 bench/soak_workloads.py --build $(BUILD) --rounds $(SOAK)
	tests/integration/self_build_test.sh $(BUILD)/liballockit.so .

# The main job: record a real program, replay it against every allocator found here, write the
# HTML report; then the pool, arena and malloc benchmarks.
demo: demo-trace bench bench-malloc bench-misuse

demo-trace: all
	$(PY) bench/run_trace_demo.py --build $(BUILD) --out out/demo

bench: all
	$(PY) bench/run_pool_bench.py --build $(BUILD) --out bench/results
	$(PY) bench/run_arena_bench.py --build $(BUILD) --out bench/results

bench-malloc: all
	$(PY) bench/run_malloc_bench.py --build $(BUILD) --out bench/results
	$(PY) bench/run_start_bench.py --build $(BUILD) --out bench/results

# Issue 10's memory target: peak RSS against the liballockit the issue started from (built here).
bench-rss-baseline: all
	$(PY) bench/run_rss_baseline.py --build $(BUILD) --out bench/results

# Real programs (lua, ruby, perl, sqlite, z3, ghostscript, redis) under every allocator; installs
# the programs first.
bench-programs: all
	scripts/install-deps.sh --programs
	$(PY) bench/run_program_bench.py --build $(BUILD) --out bench/results

# Where allockit stands by block size (8 B to 8 MiB) on 1 and 2 threads, against every allocator.
bench-grid: all
	$(PY) bench/run_size_grid.py --build $(BUILD) --out bench/results

# Thirty classic misuse cases under every allocator: which ones each detects.
bench-misuse: all
	$(PY) bench/run_misuse_bench.py --build $(BUILD) --out bench/results

# Trace lab figures: recording overhead (against heaptrack), replay throughput, journal size,
# report time; and every ../shared/traces journal replayed against every allocator.
bench-trace: all
	$(PY) bench/run_trace_bench.py --build $(BUILD) --out bench/results
	$(PY) bench/run_sites_bench.py --build $(BUILD) --out bench/results

format:
	clang-format -i $$(git ls-files -co --exclude-standard '*.hpp' '*.cpp' '*.h' '*.c')

format-check: deps
	@files=$$(git ls-files -co --exclude-standard '*.hpp' '*.cpp' '*.h' '*.c'); \
	if [ -n "$$files" ] && ! clang-format --dry-run --Werror $$files; then \
	  echo "clang-format: run 'make format'"; exit 1; fi

clean:
	rm -rf build build-asan build-tsan build-tsan-release build-fuzz out
