#!/usr/bin/env bash
# bench/massif.sh BUILD [HOLD]: where the heap of one held stream goes.
#
# Starts, in a temp directory on 127.0.0.1 and ephemeral ports, `airetry mock`
# (model `slow`: head and role event at once, first token after 60 s) and
# `airetry serve --workers 1` under valgrind massif; warms the worker with a
# few streamed requests, takes a detailed heap snapshot (vgdb), opens HOLD
# streams (default 500) with bench_loadgen --hold, waits until the mock has
# seen them all, takes a second snapshot and prints, per allocation site
# (first frame below malloc), the heap bytes that site grew by, divided by
# HOLD: the requested bytes of one held stream, without malloc's overhead
# (16 bytes per chunk) and without libcurl's connection cache or kernel
# memory. Deterministic up to a few bytes. Builds nothing.
set -euo pipefail
build=${1:-build}
hold=${2:-500}
air=$build/airetry
lg=$build/bench_loadgen
command -v valgrind >/dev/null || { echo "skipped: needs valgrind"; exit 0; }
me=bench/massif.sh
. "$(dirname "$0")/lib.sh"
printf 'defaults: {tokens: 8, delay_ms: 0}\nmodels:\n  fast: {}\n  slow: {then: {first_delay_ms: 60000}}\n' \
  >"$tmp/mock.yaml"
start mock "$air" mock --listen 127.0.0.1:0 --script "$tmp/mock.yaml"
MOCK_PORT=$PORT
cat >"$tmp/gw.yaml" <<EOF
providers:
  - {name: mock, api: openai, base_url: "http://127.0.0.1:$MOCK_PORT/v1"}
routes:
  - {name: fast, targets: [mock/fast]}
  - {name: slow, targets: [mock/slow]}
limits: {max_connections: $((hold + 1024))}
EOF
start gw valgrind --tool=massif --threshold=0.05 --trace-children=yes --vgdb=yes \
  --massif-out-file="$tmp/massif.%p" \
  "$air" serve --config "$tmp/gw.yaml" --listen 127.0.0.1:0 --workers 1
GW_PORT=$PORT
worker=$(worker_of "$PID")
url=http://127.0.0.1:$GW_PORT/v1/chat/completions
"$lg" --url "$url" --model fast --stream -c 4 -w 0 -d 0.5 --label warm >/dev/null
vgdb --pid="$worker" detailed_snapshot "$tmp/before" >/dev/null
# Never "ready" (the match never occurs): the streams stay open until the
# second snapshot is taken; the mock's log tells when they are all upstream.
"$lg" --url "$url" --model slow --hold "$hold" --pid "$worker" --ready-url "http://127.0.0.1:$MOCK_PORT/__mock/log" \
  --ready-match NEVER-MATCHES --ready-min 99999999 --hold-timeout 90 \
  --label hold >/dev/null &
pids+=("$!")
seen=0
for _ in $(seq 600); do
  seen=$(curl -s "http://127.0.0.1:$MOCK_PORT/__mock/log" | grep -o '"model":"slow"' | wc -l || true)
  [ "$seen" -ge "$hold" ] && break
  sleep 0.2
done
sleep 1
vgdb --pid="$worker" detailed_snapshot "$tmp/after" >/dev/null
echo "held: $hold streams, $seen upstream"
# Depth-1 entries (one space of indent) of each snapshot's heap tree.
sites() { awk '/^ n[0-9]+: [0-9]+ / { b = $2; $1 = ""; $2 = ""; sub(/^ +0x[0-9A-F]+: /, ""); s[$0] += b }
  END { for (k in s) print s[k] "\t" k }' "$1"; }
sites "$tmp/before" >"$tmp/b.tsv"
sites "$tmp/after" >"$tmp/a.tsv"
awk -F'\t' -v n="$hold" 'NR == FNR { b[$2] = $1; next } { a[$2] = $1 }
  END { for (k in a) { d = (a[k] - b[k]) / n; t += d; if (d >= 20 || d <= -20) printf "%8.0f  %s\n", d, k }
        for (k in b) if (!(k in a)) { d = -b[k] / n; t += d }
        printf "%8.0f  bytes per held stream in all\n", t }' "$tmp/b.tsv" "$tmp/a.tsv" | sort -k1,1nr
