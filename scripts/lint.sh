#!/usr/bin/env bash
# Static analysis: cppcheck over src/, then clang-tidy (the checks of
# .clang-tidy) over every C source under src/ through scripts/tidy.py and
# the build's compile_commands.json. Any finding fails (exit 1).
#
#   scripts/lint.sh [BUILD_DIR]     (default: build; `make lint` configures it)
#
# LINT_JOBS (default 2) files at a time. clang-tidy's analyzer takes minutes
# over the tree, so a file that passed is not checked again while nothing it
# reads has changed (scripts/tidy.py): LINT_CACHE is that record's folder
# (default ~/.cache/airetry-lint; empty: check every file).
#
# A false positive is suppressed on its line, with the reason next to it:
#   /* cppcheck-suppress ID */ on the line before the one cppcheck reports
#   /* NOLINTNEXTLINE(check-name) */ likewise for clang-tidy (or NOLINT(...)
#   at the end of the reported line).
set -eu -o pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
jobs="${LINT_JOBS:-2}"
cache="${LINT_CACHE-${XDG_CACHE_HOME:-$HOME/.cache}/airetry-lint}"

for tool in cppcheck clang-tidy python3; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "lint: '$tool' not found (scripts/deps.sh installs cppcheck and clang-tidy)" >&2
    exit 1
  fi
done
if [ ! -f "$build/compile_commands.json" ]; then
  echo "lint: $build/compile_commands.json missing: run 'make build' first" >&2
  exit 1
fi

status=0

echo "== cppcheck =="
# -D_POSIX_C_SOURCE pins the one configuration the build uses (cppcheck
# would otherwise try every #ifdef combination); the -I folders let it see
# the project's own headers (macros, struct layouts).
if ! cppcheck --enable=warning,portability,performance --error-exitcode=1 \
     --inline-suppr --suppress=missingIncludeSystem --quiet -j "$jobs" \
     -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc/core -Isrc/state -Isrc/stream -Isrc/codec \
     -Isrc/config -Isrc/drive -Isrc/net -Isrc/http -Isrc/gateway -Isrc/mock src; then
  echo "lint: cppcheck found problems (above)" >&2
  status=1
fi

echo "== clang-tidy =="
# Every C source under src/, found now: a new file or folder is checked the
# day it appears. tidy.py exits 1 when any file has a finding
# (WarningsAsErrors: '*' in .clang-tidy) or is not in the build.
mapfile -t files < <(find src -name '*.c' | LC_ALL=C sort)
if [ "${#files[@]}" -eq 0 ]; then
  echo "lint: no C sources under src/" >&2
  exit 1
fi
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
if ! scripts/tidy.py "$build" "$jobs" "$cache" "${files[@]}" >"$out" 2>&1; then
  status=1
fi
sed 's/\x1b\[[0-9;]*m//g' "$out" |
  grep -vE '^(clang-tidy(-[0-9]+)? |Running clang-tidy|[0-9]+ warnings? (and [0-9]+ errors? )?generated\.|Suppressed [0-9]+ warnings|Use -header-filter|Error while processing)' || true
if [ "$status" -ne 0 ]; then
  echo "lint: failed: fix each finding or suppress it on its line with the reason" >&2
  exit 1
fi
echo "lint: ok"
