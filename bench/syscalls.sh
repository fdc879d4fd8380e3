#!/usr/bin/env bash
# System calls per proxied request (docs/performance.md): the gateway's worker
# (`serve --workers 1`, in front of `airetry mock`'s `fast` model) under
# `strace -f -c` while bench_loadgen drives it for AIR_SC_SECONDS (default 3)
# at AIR_SC_CONC connections (default 16), after a 1 s warm-up. Prints strace's
# table (every thread of the worker: the loop and the log thread) and the calls
# per request. strace slows the worker several times: the counts are the
# figure, not the times.
#
#   bench/syscalls.sh BUILD [json|stream]
set -euo pipefail
build=${1:-build}
mode=${2:-json}
secs=${AIR_SC_SECONDS:-3}
conc=${AIR_SC_CONC:-16}
air=$build/airetry
lg=$build/bench_loadgen
command -v strace >/dev/null || { echo "skipped: needs strace"; exit 0; }
me=bench/syscalls.sh
. "$(dirname "$0")/lib.sh"
printf 'defaults: {tokens: 8, delay_ms: 0}\nmodels:\n  fast: {}\n' >"$tmp/mock.yaml"
start mock "$air" mock --listen 127.0.0.1:0 --script "$tmp/mock.yaml"
MOCK_PORT=$PORT
cat >"$tmp/gw.yaml" <<EOF2
providers:
  - {name: mock, api: openai, base_url: "http://127.0.0.1:$MOCK_PORT/v1"}
routes:
  - {name: fast, targets: [mock/fast]}
EOF2
start gw "$air" serve --config "$tmp/gw.yaml" --listen 127.0.0.1:0 --workers 1
GW_PORT=$PORT
worker=$(worker_of "$PID")
args=(--url "http://127.0.0.1:$GW_PORT/v1/chat/completions" --model fast -c "$conc" -w 0)
[ "$mode" = stream ] && args+=(--stream)
"$lg" "${args[@]}" -d 1 --label warm >/dev/null
strace -f -c -p "$worker" -o "$tmp/strace.txt" 2>"$tmp/strace.err" &
st=$!
# strace says "attached" (to every thread) once it traces.
for _ in $(seq 200); do grep -q attached "$tmp/strace.err" 2>/dev/null && break; sleep 0.05; done
line=$("$lg" "${args[@]}" -d "$secs" --label "$mode")
kill -INT "$st"
wait "$st" || true
n=$(sed -n 's/.* n=\([0-9]*\).*/\1/p' <<<"$line")
echo "$line"
cat "$tmp/strace.txt"
awk -v n="$n" '$NF == "total" { printf "system calls per request (%s, c=%s): %.2f (%s / %s; the window edges add up to one request per connection)\n", "'"$mode"'", "'"$conc"'", $4 / n, $4, n }' "$tmp/strace.txt"
awk -v n="$n" 'NF >= 5 && $NF ~ /^[a-z_0-9]+$/ && $NF != "total" && $NF != "syscall" { printf "  %-14s %6.2f per request\n", $NF, $4 / n }' "$tmp/strace.txt"
