#!/usr/bin/env bash
# Two gateway builds alternated against one upstream (docs/performance.md, "Side
# by side with nginx"): nginx returning the mock's `fast` SSE stream (what every
# gateway receives, as in bench/vs_nginx.sh), both gateways running at once on
# 127.0.0.1 ephemeral ports, bench_loadgen at c=64 on one and then the other,
# AIR_AB_ROUNDS times per mode (default 4; 1 s warmup, AIR_AB_SECONDS measured,
# default 3; AIR_AB_CONC connections, default 64). Prints req/s, the gateway
# worker's CPU per request and p50 latency of every run and the medians. Wall-clock on a shared machine: the alternation, not one run,
# is the figure.
#
#   bench/ab.sh OLD_BUILD NEW_BUILD     (bench_loadgen and curl from NEW_BUILD)
set -euo pipefail
old=${1:?old build dir}
new=${2:?new build dir}
rounds=${AIR_AB_ROUNDS:-4}
secs=${AIR_AB_SECONDS:-3}
conc=${AIR_AB_CONC:-64}
lg=$new/bench_loadgen
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || { echo "skipped: needs nginx (scripts/deps.sh bench)"; exit 0; }
tmp=$(mktemp -d /tmp/airetry-ab.XXXXXX)
pids=()
stop_all() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
}
trap 'stop_all; rm -rf "$tmp"' EXIT
start() {
  local name=$1
  shift
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  PID=$!
  pids+=("$PID")
  for _ in $(seq 100); do
    PORT=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$tmp/$name.out")
    [ -n "$PORT" ] && return 0
    sleep 0.05
  done
  echo "bench/ab.sh: $name did not start" >&2
  cat "$tmp/$name.err" >&2
  exit 1
}
printf 'defaults: {tokens: 8, delay_ms: 0}\nmodels:\n  fast: {}\n' >"$tmp/mock.yaml"
start mock "$new/airetry" mock --listen 127.0.0.1:0 --script "$tmp/mock.yaml"
q='{"model":"fast","messages":[{"role":"user","content":"Say hello to the benchmark."}]'
curl -sf "http://127.0.0.1:$PORT/v1/chat/completions" \
  -d "$q,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" >"$tmp/fixed.sse"
NPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$tmp/nginx.conf" <<EOF
pid $tmp/nginx.pid;
error_log $tmp/nginx.log warn;
worker_processes 1;
daemon off;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $tmp/body; proxy_temp_path $tmp/proxy;
  fastcgi_temp_path $tmp/fcgi; uwsgi_temp_path $tmp/uwsgi; scgi_temp_path $tmp/scgi;
  keepalive_requests 100000000;
  server {
    listen 127.0.0.1:$NPORT;
    location / { default_type text/event-stream; return 200 '$(cat "$tmp/fixed.sse")'; }
  }
}
EOF
"$nginx" -p "$tmp" -c "$tmp/nginx.conf" -e "$tmp/nginx.log" >"$tmp/nginx.out" 2>&1 &
pids+=("$!")
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$NPORT/" && break; sleep 0.05; done
cat >"$tmp/gw.yaml" <<EOF
providers:
  - {name: nginx, api: openai, base_url: "http://127.0.0.1:$NPORT/v1"}
routes:
  - {name: fast, targets: [nginx/fast]}
EOF
declare -A GP GW
for b in old new; do
  dir=$old
  [ "$b" = new ] && dir=$new
  start "gw-$b" "$dir/airetry" serve --config "$tmp/gw.yaml" --listen 127.0.0.1:0
  GP[$b]=$PORT
  GW[$b]=$(cat /proc/"$PID"/task/*/children 2>/dev/null | awk '{print $1; exit}')
  [ -n "${GW[$b]}" ] || GW[$b]=$PID
done
kv() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"; }
echo "== bench/ab.sh: $old (old) vs $new (new), c=$conc, ${secs} s x $rounds each, $(date -u +%H:%MZ), load $(cut -d' ' -f1 /proc/loadavg)"
for mode in json stream; do
  declare -A RPS=() CPU=() P50=()
  for r in $(seq "$rounds"); do
    for b in old new; do
      args=(--url "http://127.0.0.1:${GP[$b]}/v1/chat/completions" --model fast -c "$conc" -w 1
        -d "$secs" --pid "${GW[$b]}" --label "$b")
      [ "$mode" = stream ] && args+=(--stream)
      l=$("$lg" "${args[@]}")
      RPS[$b]+="$(kv "$l" rps) " CPU[$b]+="$(kv "$l" cpu_us_per_req_pid0) "
      P50[$b]+="$(kv "$l" p50_us) "
    done
  done
  for b in old new; do
    med() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
    printf '%-6s %-4s req/s: %-40s median %7.0f | gateway CPU/req (us): %-30s median %5.1f | p50 (us) median %7.1f\n' \
      "$mode" "$b" "${RPS[$b]}" "$(med "${RPS[$b]}")" "${CPU[$b]}" "$(med "${CPU[$b]}")" "$(med "${P50[$b]}")"
  done
done
