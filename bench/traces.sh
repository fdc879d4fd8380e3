#!/usr/bin/env bash
# Gateway CPU per exported span (docs/performance.md, "Traces"): the same
# load (bench_loadgen, route `fast`: one attempt, so two spans per request)
# through a gateway without tracing and through one exporting every span to
# a receiver that answers 204 at once (python3's http.server, standard
# library; the receiver's own CPU is not the gateway's). The difference in
# the worker's CPU per request, halved, is the cost of one span: building,
# encoding, queueing and exporting it. Builds nothing: $1 is the build dir.
# Everything binds 127.0.0.1 on ephemeral ports; every process started here
# is stopped on exit.
#
#   AIR_BENCH_SECONDS  measured seconds per run (default 5, plus 1 s warmup)
#   AIR_BENCH_CONNS    concurrency (default 8)
set -euo pipefail
build=${1:-build}
secs=${AIR_BENCH_SECONDS:-5}
conns=${AIR_BENCH_CONNS:-8}
air=$build/airetry
lg=$build/bench_loadgen
if [ ! -x "$air" ] || [ ! -x "$lg" ] || ! command -v python3 >/dev/null; then
  echo "skipped: needs $air, $lg and python3"
  exit 0
fi
tmp=$(mktemp -d /tmp/airetry-bench-traces.XXXXXX)
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

# start NAME CMD...: as bench/gateway.sh; sets PID and PORT.
start() {
  local name=$1
  shift
  : >"$tmp/$name.out"
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
  echo "bench/traces.sh: $name did not start:" >&2
  cat "$tmp/$name.err" >&2
  exit 1
}

cat >"$tmp/receiver.py" <<'PY'
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(204)
        self.send_header("content-length", "0")
        self.end_headers()
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print("listening on http://127.0.0.1:%d" % s.server_address[1], flush=True)
s.serve_forever()
PY
cat >"$tmp/mock.yaml" <<'YAML'
defaults: {tokens: 8, delay_ms: 0}
models:
  fast: {}
YAML
start mock "$air" mock --listen 127.0.0.1:0 --script "$tmp/mock.yaml"
MOCK_PID=$PID MOCK_PORT=$PORT
start receiver python3 "$tmp/receiver.py"
RECV_PORT=$PORT
cat >"$tmp/gw.yaml" <<YAML
providers:
  - {name: mock, api: openai, base_url: "http://127.0.0.1:$MOCK_PORT/v1"}
routes:
  - {name: fast, targets: [mock/fast]}
YAML

kv() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"; }
# run LABEL ENV...: a gateway with ENV, the load, its worker's CPU per request.
run() {
  local label=$1
  shift
  : >"$tmp/gw.out"
  env "$@" "$air" serve --config "$tmp/gw.yaml" --listen 127.0.0.1:0 \
    >"$tmp/gw.out" 2>"$tmp/gw.err" &
  local sup=$!
  pids+=("$sup")
  local port=
  for _ in $(seq 100); do
    port=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$tmp/gw.out")
    [ -n "$port" ] && break
    sleep 0.05
  done
  local w
  w=$(cat /proc/"$sup"/task/*/children 2>/dev/null | awk '{print $1; exit}')
  LINE=$("$lg" --url "http://127.0.0.1:$port/v1/chat/completions" --model fast --stream \
    -c "$conns" -w 1 -d "$secs" --pid "${w:-$sup}" --label "$label")
  METRICS=$(curl -s "http://127.0.0.1:$port/metrics" | grep '^airetry_trace_spans' || true)
  kill -TERM "$sup"
  wait "$sup" 2>/dev/null || true
}

echo "== gateway CPU per exported span ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores," \
  "c=$conns streaming, ${secs} s per run) =="
run off
off=$LINE
run on OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$RECV_PORT" OTEL_BSP_SCHEDULE_DELAY=200
on=$LINE
echo "  off: $off"
echo "  on:  $on"
echo "  $(tr '\n' ' ' <<<"$METRICS")"
awk -v a="$(kv "$off" cpu_us_per_req_pid0)" -v b="$(kv "$on" cpu_us_per_req_pid0)" \
  -v ra="$(kv "$off" rps)" -v rb="$(kv "$on" rps)" \
  'BEGIN { printf "gateway CPU per request: %.1f us off, %.1f us on; per span (2 per request): %.1f us; req/s %.0f off, %.0f on\n",
             a, b, (b - a) / 2, ra, rb }'
