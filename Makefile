# airetry: the two entry points are `make demo` and `make check`.
# Each installs what is missing (scripts/deps.sh), builds, then runs.

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
PREFIX     ?= /usr/local
FUZZ_SECONDS ?= 60
CMAKE_GEN  := -G Ninja

.PHONY: all deps build build-asan demo check test checksrc bench fuzz install clean format

all: build

deps:
	@scripts/deps.sh

$(BUILD)/build.ninja: | deps
	@cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null

$(ASAN_BUILD)/build.ninja: | deps
	@cmake -S . -B $(ASAN_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug \
	  -DAIR_SANITIZE=ON >/dev/null

build: deps $(BUILD)/build.ninja
	@cmake --build $(BUILD)

build-asan: deps $(ASAN_BUILD)/build.ninja
	@cmake --build $(ASAN_BUILD)

# The main job: a flaky mock upstream, the gateway in front, five streamed
# requests with a live trace (no keys, no network).
demo: build
	@$(BUILD)/airetry demo

checksrc:
	@scripts/checksrc.sh

# Normal build first, then ASan+UBSan; the last line printed is ctest's summary.
check: deps checksrc build build-asan
	@echo "== tests (release build) =="
	@cd $(BUILD) && ctest --output-on-failure -j2
	@echo "== tests (ASan + UBSan) =="
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j2

test: check

bench: build
	@scripts/bench.sh $(BUILD)

fuzz: deps
	@CC=clang cmake -S . -B $(FUZZ_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug \
	  -DAIR_FUZZ=ON -DAIR_TESTS=OFF >/dev/null
	@cmake --build $(FUZZ_BUILD)
	@scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

format:
	@clang-format -i include/*.h src/*/*.[ch] tests/unit/*.c examples/*.c bench/*.c fuzz/*.c

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
