#!/usr/bin/env bash
# Runs every libFuzzer target of build dir $1 for $2 seconds each, starting
# from a scratch copy of its seed corpus (fuzz/corpus/<target without fuzz_>),
# and fails on the first finding (crash, leak, sanitizer report, timeout).
# Findings are saved as fuzz/crash-*; add them to the corpus once fixed.
set -euo pipefail
build=${1:?build dir}
secs=${2:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
status=0
for bin in "$build"/fuzz_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  seeds="$root/fuzz/corpus/${name#fuzz_}"
  work=$(mktemp -d)
  [ -d "$seeds" ] && cp -r "$seeds"/. "$work"/
  echo "== $name: ${secs}s"
  if ! "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="$root/fuzz/crash-$name-" -print_final_stats=1 "$work" \
       >"$work.log" 2>&1; then
    tail -40 "$work.log"
    echo "FAIL: $name found a problem (see fuzz/crash-$name-*)"
    status=1
  else
    grep -E '^(stat::number_of_executed_units|Done)' "$work.log" || true
  fi
  rm -rf "$work" "$work.log"
done
exit $status
