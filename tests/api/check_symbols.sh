#!/usr/bin/env bash
# The public API in three places must agree (as curl checks its symbols
# against its docs):
#   1. the functions include/airetry/*.h declare with AIR_EXTERN, per header;
#   2. the functions docs/api.md lists ("- `air_name()` — ..."), per header
#      section ("## airetry/core.h");
#   3. every symbol libairetry.so exports (nm -D --defined-only): nothing but
#      those functions, so no internal air__* (nor anything else) leaks.
# Also: each public header stays under 450 lines (formatted at 80 columns),
# and the library's soname is the one docs/api.md names ("The shared library
# is `libairetry.so.N`"), so an ABI change cannot bump one without the other.
#
# usage: check_symbols.sh INCLUDE_DIR DOC LIBAIRETRY_SO
#        check_symbols.sh --self-test INCLUDE_DIR DOC LIBAIRETRY_SO
# --self-test checks that the comparison fails for a doc line missing, a
# declaration the docs lack, and an exported internal symbol, and passes on
# the real tree.
set -u

MAX_HEADER_LINES=450

# "header name" per AIR_EXTERN function declared in DIR/airetry/*.h. The
# name is the identifier just before the first '(' after AIR_EXTERN (the
# declaration may wrap; the name is on the AIR_EXTERN line).
header_set() {
  local dir=$1 h
  for h in "$dir"/airetry/*.h; do
    grep -h 'AIR_EXTERN' "$h" | grep -v '^#' |
      sed -nE 's/.*[^A-Za-z0-9_](air_[A-Za-z0-9_]+)[[:space:]]*\(.*/\1/p' |
      sed "s|^|airetry/$(basename "$h") |"
  done | sort -u
}

# "header name" per "- `air_name()`" line of DOC, under its "## airetry/x.h".
doc_set() {
  awk '
    /^## / { sec = ($2 ~ /^airetry\/[a-z]+\.h$/) ? $2 : ""; next }
    sec != "" && /^- `air_[A-Za-z0-9_]+\(\)`/ {
      name = $2; gsub(/[`()]/, "", name); print sec, name
    }' "$1" | sort -u
}

# Every defined dynamic symbol of the library, one per line.
nm_set() {
  nm -D --defined-only "$1" | awk 'NF >= 3 { print $3 }' | sort -u
}

# compare HEADERS DOCS NM (three files): 0 when they agree.
compare() {
  local hs=$1 ds=$2 ns=$3 bad=0
  if ! diff -u --label headers --label docs/api.md "$hs" "$ds" >&2; then
    echo "check_symbols: the headers' AIR_EXTERN functions and docs/api.md differ (above)" >&2
    bad=1
  fi
  if ! diff -u --label headers --label libairetry.so <(awk '{print $2}' "$hs" | sort -u) "$ns" >&2; then
    echo "check_symbols: the headers' AIR_EXTERN functions and the library's exports differ (above)" >&2
    bad=1
  fi
  if [ ! -s "$hs" ]; then
    echo "check_symbols: no AIR_EXTERN declaration found" >&2
    bad=1
  fi
  return $bad
}

self_test=0
if [ "${1:-}" = "--self-test" ]; then
  self_test=1
  shift
fi
if [ $# -ne 3 ]; then
  echo "usage: $0 [--self-test] INCLUDE_DIR DOC LIBAIRETRY_SO" >&2
  exit 2
fi
inc=$1 doc=$2 lib=$3
for f in "$inc/airetry.h" "$doc" "$lib"; do
  [ -e "$f" ] || { echo "check_symbols: $f not found" >&2; exit 2; }
done
for tool in nm objdump; do
  command -v $tool >/dev/null || { echo "check_symbols: $tool not found" >&2; exit 2; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
header_set "$inc" >"$tmp/h"
doc_set "$doc" >"$tmp/d"
nm_set "$lib" >"$tmp/n"

if [ $self_test -eq 1 ]; then
  fails=0
  expect_fail() {  # what h d n
    if compare "$2" "$3" "$4" 2>/dev/null; then
      echo "self-test: not caught: $1" >&2
      fails=$((fails + 1))
    else
      echo "self-test: caught: $1"
    fi
  }
  sed 1d "$tmp/d" >"$tmp/d1"
  expect_fail "a function missing from docs/api.md" "$tmp/h" "$tmp/d1" "$tmp/n"
  { cat "$tmp/h"; echo "airetry/core.h air_zz_undocumented"; } | sort >"$tmp/h1"
  { cat "$tmp/n"; echo "air_zz_undocumented"; } | sort >"$tmp/n1"
  expect_fail "a declared and exported function the docs lack" "$tmp/h1" "$tmp/d" "$tmp/n1"
  { cat "$tmp/n"; echo "air__internal"; } | sort >"$tmp/n2"
  expect_fail "an exported internal symbol" "$tmp/h" "$tmp/d" "$tmp/n2"
  sed 1d "$tmp/n" >"$tmp/n3"
  expect_fail "a declared function the library does not export" "$tmp/h" "$tmp/d" "$tmp/n3"
  awk '!done && $1 == "airetry/core.h" { $1 = "airetry/client.h"; done = 1 } { print }' \
    "$tmp/d" | sort >"$tmp/d2"
  expect_fail "a function documented under the wrong header" "$tmp/h" "$tmp/d2" "$tmp/n"
  # A wrapped declaration still counts (the parser, not the sets).
  mkdir -p "$tmp/inc/airetry"
  printf 'AIR_EXTERN const char *air_zz_one(void);\nAIR_EXTERN int air_zz_two(int a,\n                           int b);\n#define AIR_EXTERN x\n' \
    >"$tmp/inc/airetry/x.h"
  if [ "$(header_set "$tmp/inc" | tr '\n' ' ')" != "airetry/x.h air_zz_one airetry/x.h air_zz_two " ]; then
    echo "self-test: the header parser misread: $(header_set "$tmp/inc" | tr '\n' ' ')" >&2
    fails=$((fails + 1))
  fi
  if ! compare "$tmp/h" "$tmp/d" "$tmp/n"; then
    echo "self-test: the real tree does not pass" >&2
    fails=$((fails + 1))
  fi
  [ $fails -eq 0 ] || exit 1
  echo "check_symbols self-test: ok"
  exit 0
fi

bad=0
for h in "$inc"/airetry.h "$inc"/airetry/*.h; do
  n=$(wc -l <"$h")
  if [ "$n" -ge $MAX_HEADER_LINES ]; then
    echo "check_symbols: $h has $n lines (public headers stay under $MAX_HEADER_LINES)" >&2
    bad=1
  fi
done
compare "$tmp/h" "$tmp/d" "$tmp/n" || bad=1
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" { print $2 }')
doc_soname=$(grep -oE 'The shared library is `libairetry\.so\.[0-9]+`' "$doc" | grep -oE 'libairetry\.so\.[0-9]+')
if [ -z "$soname" ] || [ "$soname" != "$doc_soname" ]; then
  echo "check_symbols: the library's soname is '$soname', docs/api.md says '$doc_soname'" >&2
  bad=1
fi
[ $bad -eq 0 ] || exit 1
echo "check_symbols: $(wc -l <"$tmp/h") public functions agree in headers, docs/api.md and $(basename "$lib")"
