# airetry: the two entry points are `make demo` and `make check`.
# Each installs what is missing (scripts/deps.sh), builds, then runs.

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
PREFIX     ?= /usr/local
FUZZ_SECONDS ?= 60
CMAKE_GEN  := -G Ninja

.PHONY: all deps build build-asan demo check test unit checksrc format-check lint bench fuzz install clean format soak sim

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

# The main job: a flaky mock upstream, the gateway in front, seven streamed
# requests with a live trace (no keys, no network).
demo: build
	@$(BUILD)/airetry demo

checksrc:
	@scripts/checksrc.sh

# clang-format --dry-run --Werror over every C file of the tree (.clang-format);
# `make format` rewrites what it reports.
format-check:
	@scripts/format.sh --check

# cppcheck + clang-tidy (.clang-tidy); clang-tidy reads the release build's
# compile_commands.json, so the build comes first when it is missing.
lint: deps
	@[ -f $(BUILD)/compile_commands.json ] || $(MAKE) --no-print-directory build
	@scripts/lint.sh $(BUILD)

# Normal build first, then ASan+UBSan; the last line printed is ctest's summary.
# lint (clang-tidy's analyzer over every source: minutes of CPU) runs beside
# the release tests, niced, on the CPU they leave idle while they wait on
# sockets and timers; its report follows theirs, and either failing fails.
check: deps checksrc format-check build build-asan
	@echo "== tests (release build), lint beside them =="
	@rm -f $(BUILD)/lint.log; \
	( nice -n 19 scripts/lint.sh $(BUILD) > $(BUILD)/lint.log 2>&1 ) & lint=$$!; \
	( cd $(BUILD) && ctest --output-on-failure -j2 ); tests=$$?; \
	wait $$lint; lrc=$$?; \
	echo "== lint =="; cat $(BUILD)/lint.log; \
	[ $$tests -eq 0 ] && [ $$lrc -eq 0 ]
	@echo "== tests (ASan + UBSan) =="
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j2

test: check

# The fast loop (docs/testing.md): the release build and its unit, layering
# and API tests only, in seconds. One test: `cd build && ctest -R NAME -V`.
unit: build
	@cd $(BUILD) && ctest --output-on-failure -j2 -R '^(layering|unit|api)/'

bench: build
	@scripts/deps.sh bench
	@scripts/bench.sh $(BUILD)

# Soak under faults: 11,000 requests through the gateway in front of a
# faulty mock, every answer, log line, metric, RSS and fd checked; then
# 11,000 more through three gateways sharing their state through a Redis
# restarted every 2 s (tests/soak/run.sh; the ~1,000- and ~1,500-request
# profiles run in `make check`).
soak: build
	@bash tests/soak/run.sh $(BUILD)/airetry long $(BUILD)/soak
	@bash tests/soak/run.sh $(BUILD)/airetry redis $(BUILD)/soak

fuzz: deps
	@CC=clang cmake -S . -B $(FUZZ_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug \
	  -DAIR_FUZZ=ON -DAIR_TESTS=OFF >/dev/null
	@cmake --build $(FUZZ_BUILD)
	@scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# The request-path simulation (docs/testing.md): N scenarios from SEED; a
# failure is written as sim-SEED.sim (replay: build/sim FILE).
SEED ?= 1
N    ?= 10000
sim: build
	@$(BUILD)/sim --seed $(SEED) --n $(N)

install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

format:
	@scripts/format.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
