#!/usr/bin/env bash
# The gateway's cost, side by side on loopback (docs/performance.md, "Gateway
# overhead"): `airetry mock` answering at once, called directly and through
# `airetry serve`, back to back, non-streaming and streaming, at concurrency
# 1 and 64, with bench_loadgen (closed loop, keep-alive; wrk, if installed,
# cross-checks req/s). Then the RSS of a fresh gateway holding open streams.
# Builds nothing: $1 is the build dir holding airetry and bench_loadgen.
# Everything binds 127.0.0.1 on ephemeral ports; every process started here
# is stopped on exit. About 80 s with the defaults.
#
#   AIR_BENCH_SECONDS  measured seconds per run (default 5, plus 1 s warmup)
#   AIR_BENCH_HOLD     open streams for the memory figure (default 1000)
set -euo pipefail
build=${1:-build}
secs=${AIR_BENCH_SECONDS:-5}
hold=${AIR_BENCH_HOLD:-1000}
air=$build/airetry
lg=$build/bench_loadgen
here=$(cd "$(dirname "$0")" && pwd)

echo "== gateway vs direct on loopback ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores," \
  "${secs} s per run) =="
if [ ! -x "$air" ] || [ ! -x "$lg" ] || ! "$air" mock --help >/dev/null 2>&1; then
  echo "skipped: needs $air (with 'mock') and $lg"
  exit 0
fi
[ "$(ulimit -n)" -ge 8192 ] || ulimit -n 8192 2>/dev/null || true

tmp=$(mktemp -d /tmp/airetry-bench.XXXXXX)
pids=()
stop_all() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  pids=()
}
trap 'stop_all; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# start NAME CMD...: runs CMD in the background (stdout $tmp/NAME.out, stderr
# $tmp/NAME.err) and sets PID and PORT from its "listening on" line.
start() {
  local name=$1
  shift
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  PID=$!
  pids+=("$PID")
  PORT=
  for _ in $(seq 100); do
    PORT=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$tmp/$name.out")
    [ -n "$PORT" ] && return 0
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.05
  done
  echo "bench/gateway.sh: $name did not start:" >&2
  cat "$tmp/$name.err" >&2
  exit 1
}

# fast: 9 tokens at once. slow: head and role event at once, first token
# after 60 s. idle: first token at once, the next after 60 s.
cat >"$tmp/mock.yaml" <<'EOF'
defaults: {tokens: 8, delay_ms: 0}
models:
  fast: {}
  slow: {then: {first_delay_ms: 60000}}
  idle: {tokens: 1000, delay_ms: 60000}
EOF

# A fresh mock and a gateway routing fast/slow/idle to it (default workers:
# one per core; the per-request log line goes to a file).
start_pair() {
  start mock "$air" mock --listen 127.0.0.1:0 --script "$tmp/mock.yaml"
  MOCK_PID=$PID MOCK_PORT=$PORT
  cat >"$tmp/gw.yaml" <<EOF
providers:
  - {name: mock, api: openai, base_url: "http://127.0.0.1:$MOCK_PORT/v1"}
  - {name: mockant, api: anthropic, base_url: "http://127.0.0.1:$MOCK_PORT"}
routes:
  - {name: fast, targets: [mock/fast]}
  - {name: fast-x, targets: [mockant/fast]}
  - {name: slow, targets: [mock/slow]}
  - {name: idle, targets: [mock/idle]}
EOF
  start gw "$air" serve --config "$tmp/gw.yaml" --listen 127.0.0.1:0
  GW_PID=$PID GW_PORT=$PORT
  # `serve` may be a supervisor (docs/design.md §5): CPU and memory are the
  # worker's, the one child that serves (an older build has none).
  local w
  w=$(cat /proc/"$PID"/task/*/children 2>/dev/null | awk '{print $1; exit}')
  [ -n "$w" ] && GW_PID=$w
  return 0
}

kv() { # kv "LINE" KEY: the value of KEY=value in LINE
  sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"
}

path=/v1/chat/completions
# load URL MODEL CONNS STREAM(0|1) LABEL PID...
load() {
  local url=$1 model=$2 c=$3 s=$4 label=$5
  shift 5
  local args=(--url "$url$path" --model "$model" -c "$c" -w 1 -d "$secs" --label "$label")
  [ "$s" = 1 ] && args+=(--stream)
  local p
  for p in "$@"; do args+=(--pid "$p"); done
  "$lg" "${args[@]}" || { echo "bench/gateway.sh: errors in: $label c=$c stream=$s" >&2; true; }
}

# ---- throughput, latency, TTFC, CPU ------------------------------------------
start_pair
direct=http://127.0.0.1:$MOCK_PORT gw=http://127.0.0.1:$GW_PORT
declare -A R
for cs in 1:0 1:1 64:0 64:1; do
  c=${cs%:*} s=${cs#*:}
  R[d$c$s]=$(load "$direct" fast "$c" "$s" direct "$MOCK_PID")
  R[g$c$s]=$(load "$gw" fast "$c" "$s" gateway "$GW_PID" "$MOCK_PID")
done
R[x11]=$(load "$gw" fast-x 1 1 translated "$GW_PID" "$MOCK_PID")
wrk_lines=()
if command -v wrk >/dev/null; then
  for u in "$direct" "$gw"; do
    wrk_lines+=("$(wrk -t1 -c64 -d"${secs}s" -s "$here/wrk/chat.lua" "$u$path" |
      awk '/Requests\/sec/ {r=$2} /Non-2xx/ {e=$NF} END {printf "%.0f %s", r, e ? e : 0}')")
  done
fi
stop_all

echo "raw (bench_loadgen):"
for k in d10 g10 d11 g11 d640 g640 d641 g641 x11; do echo "  ${R[$k]}"; done
echo
fmt='%-24s %8s %8s %5s | %6s %6s %6s | %6s %6s %6s | %6s %6s %6s %6s\n'
# shellcheck disable=SC2059
printf "$fmt" "" "req/s" "" "" "p50" "" "" "p99" "" "" "TTFC" "" "" ""
# shellcheck disable=SC2059
printf "$fmt" case direct gateway ratio direct gw added direct gw added \
  "d p50" "gw p50" "+p50" "+p99"
row() { # row LABEL DIRECT_LINE GATEWAY_LINE
  local d=$2 g=$3 t
  if [ -n "$(kv "$d" ttfc_p50_us)" ]; then
    t=$(awk -v a="$(kv "$d" ttfc_p50_us)" -v b="$(kv "$g" ttfc_p50_us)" \
      -v c="$(kv "$d" ttfc_p99_us)" -v e="$(kv "$g" ttfc_p99_us)" \
      'BEGIN { printf "%6.0f %6.0f %6.0f %6.0f", a, b, b - a, e - c }')
  else
    t=$(printf '%6s %6s %6s %6s' - - - -)
  fi
  awk -v l="$1" -v t="$t" \
    -v dr="$(kv "$d" rps)" -v gr="$(kv "$g" rps)" \
    -v d5="$(kv "$d" p50_us)" -v g5="$(kv "$g" p50_us)" \
    -v d9="$(kv "$d" p99_us)" -v g9="$(kv "$g" p99_us)" \
    'BEGIN { printf "%-24s %8.0f %8.0f %4.0f%% | %6.0f %6.0f %6.0f | %6.0f %6.0f %6.0f | %s\n",
               l, dr, gr, 100 * gr / dr, d5, g5, g5 - d5, d9, g9, g9 - d9, t }'
}
row "c=1  non-streaming" "${R[d10]}" "${R[g10]}"
row "c=1  streaming" "${R[d11]}" "${R[g11]}"
row "c=64 non-streaming" "${R[d640]}" "${R[g640]}"
row "c=64 streaming" "${R[d641]}" "${R[g641]}"
row "c=1  streaming, OAI>Anth" "${R[d11]}" "${R[x11]}"
echo "(latencies in us; 'OAI>Anth': OpenAI caller, Anthropic upstream, translated," \
  "vs the direct OpenAI stream)"
if [ ${#wrk_lines[@]} -eq 2 ]; then
  awk -v d="${wrk_lines[0]}" -v g="${wrk_lines[1]}" 'BEGIN { split(d, a, " "); split(g, b, " ");
    printf "wrk -t1 -c64 non-streaming: direct %.0f req/s, gateway %.0f req/s (%.0f%%), non-2xx %d/%d\n",
      a[1], b[1], 100 * b[1] / a[1], a[2], b[2] }'
fi
echo
echo "CPU per request (us, all threads, during the measured window):"
printf '%-24s %8s %8s | %8s %8s %8s\n' case "mock" "loadgen" "gateway" "mock" "loadgen"
printf '%-24s %17s | %26s\n' "" "(direct)" "(through the gateway)"
for k in 10:"c=1  non-streaming" 11:"c=1  streaming" 640:"c=64 non-streaming" \
  641:"c=64 streaming"; do
  d=${R[d${k%%:*}]} g=${R[g${k%%:*}]}
  printf '%-24s %8s %8s | %8s %8s %8s\n' "${k#*:}" "$(kv "$d" cpu_us_per_req_pid0)" \
    "$(kv "$d" cpu_us_per_req_self)" "$(kv "$g" cpu_us_per_req_pid0)" \
    "$(kv "$g" cpu_us_per_req_pid1)" "$(kv "$g" cpu_us_per_req_self)"
done

# ---- memory per open stream ----------------------------------------------------
# A fresh pair for each: warm the gateway with a few requests, read its RSS,
# open the streams, wait until the mock has seen them (or its count stops
# growing: the gateway queues upstream requests beyond its connection pool),
# read the RSS again. slow: waiting for the first token (not committed);
# idle: committed, idle between tokens.
echo
hold_lines=()
for mh in slow:"$hold" idle:"$hold" slow:100; do
  m=${mh%:*} n=${mh#*:}
  start_pair
  "$lg" --url "http://127.0.0.1:$GW_PORT$path" --model fast --stream -c 4 -w 0 -d 0.5 \
    --label warm >/dev/null || true
  hold_lines+=("$("$lg" --url "http://127.0.0.1:$GW_PORT$path" --model "$m" --hold "$n" \
    --pid "$GW_PID" --ready-url "http://127.0.0.1:$MOCK_PORT/__mock/log" \
    --ready-match "\"model\":\"$m\"" --hold-timeout 20 --label "hold-$m" || true)")
  for p in mock:$MOCK_PID gw:$GW_PID; do
    kill -0 "${p#*:}" 2>/dev/null && continue
    echo "bench/gateway.sh: ${p%:*} exited during the hold:" >&2
    tail -5 "$tmp/${p%:*}.err" >&2
  done
  stop_all
done
echo "raw (bench_loadgen --hold):"
for l in "${hold_lines[@]}"; do echo "  $l"; done
for l in "${hold_lines[@]}"; do
  printf '%-10s %5s client streams open, %5s upstream at the mock: gateway RSS %6s -> %6s KiB = %6s KiB per stream\n' \
    "$(awk '{print $1}' <<<"$l")" "$(kv "$l" open)" "$(kv "$l" upstream_seen)" \
    "$(kv "$l" rss_before_kib)" "$(kv "$l" rss_after_kib)" "$(kv "$l" kib_per_stream)"
done

# ---- targets --------------------------------------------------------------------
echo
awk -v a="$(kv "${R[d10]}" p50_us)" -v b="$(kv "${R[g10]}" p50_us)" \
  -v c="$(kv "${R[d10]}" p99_us)" -v d="$(kv "${R[g10]}" p99_us)" \
  -v e="$(kv "${R[d11]}" p50_us)" -v f="$(kv "${R[g11]}" p50_us)" \
  -v g="$(kv "${R[d11]}" p99_us)" -v h="$(kv "${R[g11]}" p99_us)" \
  -v i="$(kv "${R[d640]}" rps)" -v j="$(kv "${R[g640]}" rps)" \
  -v k="$(kv "${R[d641]}" rps)" -v m="$(kv "${R[g641]}" rps)" \
  -v s1="$(kv "${hold_lines[0]}" kib_per_stream)" \
  -v s2="$(kv "${hold_lines[1]}" kib_per_stream)" \
  -v s3="$(kv "${hold_lines[2]}" kib_per_stream)" -v n="$hold" \
  'function v(ok) { return ok ? "met" : "NOT met" }
   BEGIN {
     printf "target: added p50 < 50 us at c=1: non-streaming %.0f us, streaming %.0f us: %s\n",
       b - a, f - e, v(b - a < 50 && f - e < 50)
     printf "target: added p99 < 500 us at c=1: non-streaming %.0f us, streaming %.0f us: %s\n",
       d - c, h - g, v(d - c < 500 && h - g < 500)
     printf "target: gateway >= 50%% of direct req/s at c=64: non-streaming %.0f%%, streaming %.0f%%: %s\n",
       100 * j / i, 100 * m / k, v(j >= i / 2 && m >= k / 2)
     printf "target: < 32 KiB per open stream, %d streams: waiting %.1f KiB, committed %.1f KiB: %s\n",
       n, s1, s2, v(s1 != "" && s2 != "" && s1 < 32 && s2 < 32)
     printf "        the same, 100 streams all sent upstream: %.1f KiB: %s\n", s3, v(s3 != "" && s3 < 32)
   }'
