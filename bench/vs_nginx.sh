#!/usr/bin/env bash
# The gateway side by side with nginx on loopback (docs/performance.md,
# "Side by side with nginx"). Two upstreams that answer at once:
#   mock   `airetry mock`, model `fast` (role event, 9 content events, finish,
#          usage, [DONE]; a JSON body when not asked to stream),
#   nginx  nginx (Debian nginx-light) returning fixed bytes: the mock's `fast`
#          JSON body, or its SSE stream (with the usage event the gateway asks
#          for) when the request carries `Accept: text/event-stream`,
# and three paths to each: direct, through nginx `proxy_pass` (upstream
# keep-alive on, proxy_buffering off as for SSE: the reference plain proxy) and
# through `airetry serve`. Every path to one upstream receives the same bytes
# from it, except that airetry always asks upstream for the stream
# (docs/design.md §2.3) and gives a non-streaming caller the aggregate.
# Concurrency 1 and 64, non-streaming and streaming, with bench_loadgen (closed
# loop, keep-alive); the three paths of a case run back to back, and the whole
# set AIR_BENCH_ROUNDS times (alternating; figures are the mean of the rounds).
# CPU per request is from /proc (schedstat of every thread of the proxy's
# processes: airetry's worker, nginx proxy's two workers). Memory: a fresh
# gateway's VmRSS growth per open stream with AIR_BENCH_HOLD streams held
# (the mock's `slow` model: head and role event at once, first token after
# 60 s). Builds nothing: $1 is the build dir holding airetry and bench_loadgen.
# Everything binds 127.0.0.1 on ephemeral ports, in a temp directory; every
# process started here is stopped on exit. About 3 minutes with the defaults.
#
#   AIR_BENCH_SECONDS  measured seconds per run (default 3, plus 1 s warmup)
#   AIR_BENCH_ROUNDS   rounds of every case (default 2; 0: the memory figure only)
#   AIR_BENCH_HOLD     open streams for the memory figure (default 10000)
set -euo pipefail
build=${1:-build}
secs=${AIR_BENCH_SECONDS:-3}
rounds=${AIR_BENCH_ROUNDS:-2}
hold=${AIR_BENCH_HOLD:-10000}
air=$build/airetry
lg=$build/bench_loadgen

echo "== airetry side by side with nginx on loopback ($(date -u +%Y-%m-%dT%H:%MZ)," \
  "$(nproc) cores, ${secs} s per run, ${rounds} rounds; load average" \
  "$(cut -d' ' -f1 /proc/loadavg)) =="
if [ ! -x "$air" ] || [ ! -x "$lg" ]; then
  echo "skipped: needs $air and $lg"
  exit 0
fi
nginx=$(command -v nginx || true)
[ -z "$nginx" ] && [ -x /usr/sbin/nginx ] && nginx=/usr/sbin/nginx
if [ -z "$nginx" ]; then
  echo "skipped: needs nginx (scripts/deps.sh bench installs nginx-light)"
  exit 0
fi
# Each held stream is a descriptor in the load tool and the mock, and one or
# two in the gateway (client side; upstream, for the ones libcurl lets
# through: 4,096 per host per worker).
want=$((hold + 10240))
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -ge "$want" ] || want=$hard
[ "$(ulimit -n)" -ge "$want" ] || ulimit -n "$want" 2>/dev/null || true
if [ "$(ulimit -n)" -lt $((hold + 512)) ]; then
  hold=$(($(ulimit -n) - 512))
  echo "note: ulimit -n is $(ulimit -n); holding $hold streams"
fi

tmp=$(mktemp -d /tmp/airetry-vs-nginx.XXXXXX)
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

# start NAME CMD...: runs CMD in the background and sets PID and PORT from
# its "listening on" line.
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
  echo "bench/vs_nginx.sh: $name did not start:" >&2
  cat "$tmp/$name.err" >&2
  exit 1
}

children() { cat /proc/"$1"/task/*/children 2>/dev/null | tr ' ' '\n' | grep . || true; }

cat >"$tmp/mock.yaml" <<'EOF'
defaults: {tokens: 8, delay_ms: 0}
models:
  fast: {}
  slow: {then: {first_delay_ms: 60000}}
EOF
start mock "$air" mock --listen 127.0.0.1:0 --script "$tmp/mock.yaml"
MOCK_PID=$PID MOCK_PORT=$PORT

# The fixed bytes: what the mock's `fast` sends (JSON; SSE with usage).
q='{"model":"fast","messages":[{"role":"user","content":"Say hello to the benchmark."}]'
curl -sf "http://127.0.0.1:$MOCK_PORT/v1/chat/completions" -d "$q}" >"$tmp/fixed.json"
curl -sf "http://127.0.0.1:$MOCK_PORT/v1/chat/completions" \
  -d "$q,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" >"$tmp/fixed.sse"
if grep -q "'" "$tmp/fixed.json" "$tmp/fixed.sse"; then
  echo "bench/vs_nginx.sh: the mock's answer has a quote nginx's config cannot hold" >&2
  exit 1
fi

# Four free ports for nginx (it cannot report a port it picked itself).
mapfile -t ports < <(python3 -c '
import socket
s = [socket.socket() for _ in range(4)]
for x in s: x.bind(("127.0.0.1", 0))
print("\n".join(str(x.getsockname()[1]) for x in s))')
NFIX_PORT=${ports[0]} NPM_PORT=${ports[1]} NPN_PORT=${ports[2]}

common="pid $tmp/nginx-FILE.pid;
error_log $tmp/nginx-FILE.log warn;
events { worker_connections 32768; }"
http_common="access_log off;
  client_body_temp_path $tmp/body; proxy_temp_path $tmp/proxy;
  fastcgi_temp_path $tmp/fcgi; uwsgi_temp_path $tmp/uwsgi; scgi_temp_path $tmp/scgi;
  keepalive_requests 100000000; keepalive_timeout 300s;"
# The fixed upstream: one worker, like the single-threaded mock.
cat >"$tmp/nginx-fixed.conf" <<EOF
${common//FILE/fixed}
worker_processes 1;
worker_rlimit_nofile 65536;
daemon off;
http {
  $http_common
  server {
    listen 127.0.0.1:$NFIX_PORT backlog=4096;
    location = /v1/chat/completions {
      if (\$http_accept ~ "text/event-stream") { rewrite ^ /sse last; }
      rewrite ^ /json last;
    }
    location = /json { internal; default_type application/json; return 200 '$(cat "$tmp/fixed.json")'; }
    location = /sse { internal; default_type text/event-stream; return 200 '$(cat "$tmp/fixed.sse")'; }
  }
}
EOF
# The reference plain proxy: two workers (airetry runs one loop per core).
cat >"$tmp/nginx-proxy.conf" <<EOF
${common//FILE/proxy}
worker_processes 2;
worker_rlimit_nofile 65536;
daemon off;
http {
  $http_common
  upstream mock { server 127.0.0.1:$MOCK_PORT; keepalive 256; }
  upstream fixed { server 127.0.0.1:$NFIX_PORT; keepalive 256; }
  proxy_http_version 1.1;
  proxy_set_header Connection "";
  proxy_buffering off;
  server { listen 127.0.0.1:$NPM_PORT backlog=4096; location / { proxy_pass http://mock; } }
  server { listen 127.0.0.1:$NPN_PORT backlog=4096; location / { proxy_pass http://fixed; } }
}
EOF
for n in fixed proxy; do
  "$nginx" -p "$tmp" -c "$tmp/nginx-$n.conf" -e "$tmp/nginx-$n.err" \
    >"$tmp/nginx-$n.out" 2>&1 &
  pids+=("$!")
  eval "N_${n}_PID=$!"
done
for port in "$NFIX_PORT" "$NPM_PORT" "$NPN_PORT"; do
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" && break
    sleep 0.05
  done
done
NFIX_WORKER=$(children "$N_fixed_PID" | head -1)
mapfile -t NPROXY_WORKERS < <(children "$N_proxy_PID")
if [ -z "$NFIX_WORKER" ] || [ ${#NPROXY_WORKERS[@]} -ne 2 ]; then
  echo "bench/vs_nginx.sh: nginx did not start:" >&2
  cat "$tmp"/nginx-*.err "$tmp"/nginx-*.out >&2
  exit 1
fi

# The gateway: default workers (one per core), both upstreams.
cat >"$tmp/gw.yaml" <<EOF
providers:
  - {name: mock, api: openai, base_url: "http://127.0.0.1:$MOCK_PORT/v1"}
  - {name: nginx, api: openai, base_url: "http://127.0.0.1:$NFIX_PORT/v1"}
routes:
  - {name: fast, targets: [mock/fast]}
  - {name: nfast, targets: [nginx/fast]}
  - {name: slow, targets: [mock/slow]}
limits: {max_connections: $((hold + 1024))}
EOF
start_gw() {
  start gw "$air" serve --config "$tmp/gw.yaml" --listen 127.0.0.1:0
  GW_PID=$PID GW_PORT=$PORT
  local w
  w=$(children "$PID" | head -1) # the worker (docs/design.md §5); older builds: none
  [ -n "$w" ] && GW_PID=$w
  return 0
}
start_gw

kv() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"; }

path=/v1/chat/completions
# load PORT MODEL CONNS STREAM LABEL PID...: one bench_loadgen line
load() {
  local port=$1 model=$2 c=$3 s=$4 label=$5
  shift 5
  local args=(--url "http://127.0.0.1:$port$path" --model "$model" -c "$c" -w 1 -d "$secs"
    --label "$label")
  [ "$s" = 1 ] && args+=(--stream)
  local p
  for p in "$@"; do args+=(--pid "$p"); done
  "$lg" "${args[@]}" || echo "bench/vs_nginx.sh: errors in: $label c=$c stream=$s" >&2
}

# ---- throughput, latency, CPU ------------------------------------------------
declare -A L # L[up,c,s,path] = the rounds' lines, one per line
cases=()
for up in mock nginx; do for c in 1 64; do for s in 0 1; do cases+=("$up:$c:$s"); done; done; done
for r in $(seq "$rounds"); do
  for k in "${cases[@]}"; do
    IFS=: read -r up c s <<<"$k"
    if [ "$up" = mock ]; then
      dport=$MOCK_PORT nport=$NPM_PORT model=fast upid=$MOCK_PID
    else
      dport=$NFIX_PORT nport=$NPN_PORT model=nfast upid=$NFIX_WORKER
    fi
    # The direct call names the model the upstream knows; nginx ignores it.
    L[$k,d]+=$(load "$dport" fast "$c" "$s" "direct-$up" "$upid")$'\n'
    L[$k,n]+=$(load "$nport" fast "$c" "$s" "nginx-$up" "${NPROXY_WORKERS[@]}" "$upid")$'\n'
    L[$k,a]+=$(load "$GW_PORT" "$model" "$c" "$s" "airetry-$up" "$GW_PID" "$upid")$'\n'
  done
done

if [ "$rounds" -gt 0 ]; then
  echo "raw (bench_loadgen, every round):"
  for k in "${cases[@]}"; do
    for p in d n a; do printf '%s' "${L[$k,$p]}" | sed 's/^/  /'; done
  done
  echo
fi

# mean KEY LINES: the mean over the rounds' lines of KEY
mean() {
  local v
  v=$(while IFS= read -r l; do [ -n "$l" ] && kv "$l" "$1"; done <<<"$2")
  awk '$1 != "" { s += $1; n++ } END { if (n) printf "%.2f", s / n; else print "nan" }' <<<"$v"
}

[ "$rounds" -gt 0 ] && printf '%-7s %-4s %-6s | %8s %8s %8s | %6s %6s %6s | %6s %7s %7s | %6s %7s %7s | %7s %7s %5s\n' \
  upstream c mode "direct" "nginx" "airetry" "ng/d" "air/d" "air/ng" \
  "p50 d" "+nginx" "+airetry" "p99 d" "+nginx" "+airetry" "cpu ng" "cpu air" "x"
S=() # key figures for the summary
[ "$rounds" -gt 0 ] && for k in "${cases[@]}"; do
  IFS=: read -r up c s <<<"$k"
  d=${L[$k,d]} n=${L[$k,n]} a=${L[$k,a]}
  mode=$([ "$s" = 1 ] && echo stream || echo json)
  awk -v up="$up" -v c="$c" -v m="$mode" \
    -v dr="$(mean rps "$d")" -v nr="$(mean rps "$n")" -v ar="$(mean rps "$a")" \
    -v d5="$(mean p50_us "$d")" -v n5="$(mean p50_us "$n")" -v a5="$(mean p50_us "$a")" \
    -v d9="$(mean p99_us "$d")" -v n9="$(mean p99_us "$n")" -v a9="$(mean p99_us "$a")" \
    -v nc="$(awk -v x="$(mean cpu_us_per_req_pid0 "$n")" -v y="$(mean cpu_us_per_req_pid1 "$n")" \
      'BEGIN { print x + y }')" \
    -v ac="$(mean cpu_us_per_req_pid0 "$a")" \
    'BEGIN { printf "%-7s %-4s %-6s | %8.0f %8.0f %8.0f | %5.2fx %5.2fx %5.2fx | %6.0f %7.0f %7.0f | %6.0f %7.0f %7.0f | %7.1f %7.1f %4.1fx\n",
      up, c, m, dr, nr, ar, nr / dr, ar / dr, ar / nr, d5, n5 - d5, a5 - d5, d9, n9 - d9, a9 - d9,
      nc, ac, ac / nc }'
done
[ "$rounds" -gt 0 ] && echo "(req/s; ng/d, air/d: through nginx proxy_pass / airetry, over direct; air/ng: airetry"
echo " over nginx proxy_pass; p50/p99: direct latency and what each proxy adds, us; cpu: CPU"
echo " per request of the proxy's processes, us, all threads; x = airetry's over nginx's)"

# ---- memory per open stream --------------------------------------------------
# A fresh gateway, warmed with a few requests; its RSS before and after
# $hold streams are open and the mock has seen them (or its count has
# stopped growing: the gateway queues what its upstream pool cannot take).
stop_all
start mock "$air" mock --listen 127.0.0.1:0 --script "$tmp/mock.yaml"
MOCK_PID=$PID MOCK_PORT=$PORT
sed -i "s|\(name: mock, .*127\.0\.0\.1:\)[0-9]*|\1$MOCK_PORT|" "$tmp/gw.yaml"
start_gw
"$lg" --url "http://127.0.0.1:$GW_PORT$path" --model fast --stream -c 4 -w 0 -d 0.5 \
  --label warm >/dev/null || true
h=$("$lg" --url "http://127.0.0.1:$GW_PORT$path" --model slow --hold "$hold" \
  --pid "$GW_PID" --ready-url "http://127.0.0.1:$MOCK_PORT/__mock/log" \
  --ready-match '"model":"slow"' --ready-min "$(( hold < 4096 * $(nproc) ? hold : 4096 * $(nproc) ))" \
  --hold-timeout 60 --label hold || true)
echo
echo "raw: $h"
printf 'memory: %s client streams open, %s upstream at the mock: gateway RSS %s -> %s KiB = %s KiB per stream\n' \
  "$(kv "$h" open)" "$(kv "$h" upstream_seen)" "$(kv "$h" rss_before_kib)" \
  "$(kv "$h" rss_after_kib)" "$(kv "$h" kib_per_stream)"

# ---- targets (docs/performance.md) -------------------------------------------
echo
if [ "$rounds" -eq 0 ]; then
  kib=$(kv "$h" kib_per_stream)
  awk -v k="$kib" -v n="$(kv "$h" open)" 'BEGIN { printf "target: < 24 KiB per open stream (%s held): %s KiB: %s\n", n, k, (k != "" && k < 24 && n >= 10000) ? "met" : "NOT met" }'
  exit 0
fi
m() { mean "$1" "${L[$2]}"; }
awk -v nd="$(m rps nginx:64:0,d)" -v na="$(m rps nginx:64:0,a)" \
  -v md="$(m rps mock:64:1,d)" -v ma="$(m rps mock:64:1,a)" \
  -v n1="$(m cpu_us_per_req_pid0 nginx:64:0,n)" -v n2="$(m cpu_us_per_req_pid1 nginx:64:0,n)" \
  -v ac="$(m cpu_us_per_req_pid0 nginx:64:0,a)" \
  -v m1="$(m cpu_us_per_req_pid0 mock:64:1,n)" -v m2="$(m cpu_us_per_req_pid1 mock:64:1,n)" \
  -v mc="$(m cpu_us_per_req_pid0 mock:64:1,a)" \
  -v d5="$(m p50_us nginx:1:0,d)" -v a5="$(m p50_us nginx:1:0,a)" \
  -v d9="$(m p99_us nginx:1:0,d)" -v a9="$(m p99_us nginx:1:0,a)" \
  -v e5="$(m p50_us nginx:1:1,d)" -v b5="$(m p50_us nginx:1:1,a)" \
  -v e9="$(m p99_us nginx:1:1,d)" -v b9="$(m p99_us nginx:1:1,a)" \
  -v kib="$(kv "$h" kib_per_stream)" -v nh="$(kv "$h" open)" \
  'function v(ok) { return ok ? "met" : "NOT met" }
   BEGIN {
     printf "target: c=64 non-streaming, nginx upstream: airetry >= 0.35x direct: %.2fx: %s\n",
       na / nd, v(na >= 0.35 * nd)
     printf "target: c=64 streaming, mock upstream: airetry >= 0.5x direct: %.2fx: %s\n",
       ma / md, v(ma >= 0.5 * md)
     printf "target: CPU per request <= 2x nginx proxy_pass (c=64): json/nginx %.1f vs %.1f us (%.1fx), stream/mock %.1f vs %.1f us (%.1fx): %s\n",
       ac, n1 + n2, ac / (n1 + n2), mc, m1 + m2, mc / (m1 + m2),
       v(ac <= 2 * (n1 + n2) && mc <= 2 * (m1 + m2))
     printf "target: added p50 < 60 us, c=1, nginx upstream: json %.0f us, stream %.0f us: %s\n",
       a5 - d5, b5 - e5, v(a5 - d5 < 60 && b5 - e5 < 60)
     printf "target: added p99 < 500 us, c=1, nginx upstream: json %.0f us, stream %.0f us: %s\n",
       a9 - d9, b9 - e9, v(a9 - d9 < 500 && b9 - e9 < 500)
     printf "target: < 24 KiB per open stream (%s held): %s KiB: %s\n", nh, kib,
       v(kib != "" && kib < 24 && nh >= 10000)
   }'
