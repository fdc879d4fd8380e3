#!/usr/bin/env bash
# Runs every benchmark binary built from bench/bench_*.c in build dir $1.
# Figures are machine-dependent: docs/performance.md records what ran where.
set -euo pipefail
build=${1:-build}
echo "== airetry benchmarks ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores) =="
for b in "$build"/bench_*; do
  [ -x "$b" ] || continue
  echo "-- $(basename "$b")"
  "$b"
done
"$(dirname "$0")/../bench/gateway.sh" "$build"  # gateway vs direct (docs/performance.md)
