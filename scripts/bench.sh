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
# The gateway beside nginx (docs/performance.md, "Side by side with nginx");
# bench/gateway.sh (translation, wrk, 1,000 held streams) runs on its own.
"$(dirname "$0")/../bench/vs_nginx.sh" "$build"
# System calls per proxied request, one connection and 16 (strace: counts only).
for c in 1 16; do
  AIR_SC_CONC=$c "$(dirname "$0")/../bench/syscalls.sh" "$build" json | grep -A12 "^system calls per request"
done
