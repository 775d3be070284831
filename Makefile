# Front door to the CMake build. `make` builds build/ (release with debug info); `make test` runs
# the test suite in three variants: release, debug+ASan+UBSan (with AK_DEBUG checks), and TSan.
# `make demo` runs the side-by-side pool, arena and malloc benchmarks and prints the ratio tables.
BUILD      ?= build
JOBS       ?= $(shell nproc)
CMAKE_GEN  := -G Ninja
PY         ?= python3

.PHONY: all test test-release test-asan test-tsan demo bench bench-malloc format format-check clean

all:
	cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j $(JOBS)

test: format-check test-release test-asan test-tsan

test-release: all
	cd $(BUILD) && ctest -j $(JOBS) --output-on-failure

test-asan:
	cmake -S . -B build-asan $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DAK_DEBUG=ON -DAK_SANITIZE=address
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest -j $(JOBS) --output-on-failure

test-tsan:
	cmake -S . -B build-tsan $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAK_DEBUG=ON -DAK_SANITIZE=thread
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest -j $(JOBS) --output-on-failure

demo: bench bench-malloc

bench: all
	$(PY) bench/run_pool_bench.py --build $(BUILD) --out bench/results
	$(PY) bench/run_arena_bench.py --build $(BUILD) --out bench/results

bench-malloc: all
	$(PY) bench/run_malloc_bench.py --build $(BUILD) --out bench/results

format:
	clang-format -i $$(git ls-files -co --exclude-standard '*.hpp' '*.cpp' '*.h' '*.c')

format-check:
	@files=$$(git ls-files -co --exclude-standard '*.hpp' '*.cpp' '*.h' '*.c'); \
	if [ -n "$$files" ] && ! clang-format --dry-run --Werror $$files; then \
	  echo "clang-format: run 'make format'"; exit 1; fi

clean:
	rm -rf build build-asan build-tsan
