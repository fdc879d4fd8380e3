#!/usr/bin/env bash
# Instructions per proxied request, by function (docs/performance.md, "Side by
# side with nginx"): the gateway's worker under callgrind (`serve --workers 1`),
# in front of `airetry mock` (`fast`: 9 tokens at once), bench_loadgen at c=4 for 10 s;
# counters are zeroed after a warm-up, the measured run's requests are counted,
# then the profile is dumped. Deterministic, unlike wall-clock figures on a
# shared machine: use it to decide whether a change helps.
#
#   bench/callgrind.sh BUILD [json|stream] [OUT_DIR]
# prints instructions per request and the top functions (inclusive and self);
# the profile stays in OUT_DIR (default: a temp dir, removed) for
# callgrind_annotate.
set -euo pipefail
build=${1:-build}
mode=${2:-stream}
out=${3:-}
secs=${AIR_CG_SECONDS:-10}
air=$build/airetry
lg=$build/bench_loadgen
command -v valgrind >/dev/null || { echo "skipped: needs valgrind"; exit 0; }
me=bench/callgrind.sh
. "$(dirname "$0")/lib.sh"
[ -n "$out" ] || out=$tmp/out
mkdir -p "$out"
printf 'defaults: {tokens: 8, delay_ms: 0}\nmodels:\n  fast: {}\n' >"$tmp/mock.yaml"
start mock "$air" mock --listen 127.0.0.1:0 --script "$tmp/mock.yaml"
MOCK_PORT=$PORT
cat >"$tmp/gw.yaml" <<EOF
providers:
  - {name: mock, api: openai, base_url: "http://127.0.0.1:$MOCK_PORT/v1"}
routes:
  - {name: fast, targets: [mock/fast]}
EOF
start gw valgrind --tool=callgrind --trace-children=yes \
  --callgrind-out-file="$out/callgrind.out.%p" \
  "$air" serve --config "$tmp/gw.yaml" --listen 127.0.0.1:0 --workers 1
GW_PORT=$PORT
worker=$(worker_of "$PID")
args=(--url "http://127.0.0.1:$GW_PORT/v1/chat/completions" --model fast -c 4)
[ "$mode" = stream ] && args+=(--stream)
"$lg" "${args[@]}" -w 0 -d 2 --label warm >/dev/null
callgrind_control -z "$worker" >/dev/null
line=$("$lg" "${args[@]}" -w 0 -d "$secs" --label "$mode")
callgrind_control -d "$worker" >/dev/null
n=$(sed -n 's/.* n=\([0-9]*\).*/\1/p' <<<"$line")
f=$(ls -t "$out"/callgrind.out."$worker"* | head -1)
total=$(callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
echo "$line"
awk -v t="$total" -v n="$n" 'BEGIN { printf "instructions per request (%s): %.0f (%s / %s)\n", "'"$mode"'", t / n, t, n }'
echo "-- inclusive, per request"
callgrind_annotate --threshold=100 --inclusive=yes "$f" 2>/dev/null | awk -v n="$n" '
  /^-+$/ { sec++ } sec >= 3 && $1 ~ /^[0-9,]+$/ { v = $1; gsub(",", "", v); $1 = ""; $2 = ($2 ~ /\(/) ? "" : $2;
    if (k++ < 45) printf "%9.0f %s\n", v / n, $0 }'
echo "-- self, per request"
callgrind_annotate --threshold=100 "$f" 2>/dev/null | awk -v n="$n" '
  /^-+$/ { sec++ } sec >= 3 && $1 ~ /^[0-9,]+$/ { v = $1; gsub(",", "", v); $1 = ""; $2 = ($2 ~ /\(/) ? "" : $2;
    if (k++ < 45) printf "%9.0f %s\n", v / n, $0 }'
