# Shared by the single-gateway benches (callgrind.sh, massif.sh, syscalls.sh):
# a temp dir, processes started on 127.0.0.1 ephemeral ports and stopped on
# exit. Source it after setting `me` (the script's name, for messages):
#   me=bench/x.sh; . "$(dirname "$0")/lib.sh"
# start NAME CMD...  runs CMD, waits (bounded: 30 s) for its "listening on"
#                    line; sets PID and PORT.
# worker_of PID      prints the first child of PID (a gateway's worker).
tmp=$(mktemp -d "/tmp/airetry-${me##*/}.XXXXXX")
pids=()
stop_all() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  pids=()
}
trap 'stop_all; rm -rf "$tmp"' EXIT
start() {
  local name=$1
  shift
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  PID=$!
  pids+=("$PID")
  for _ in $(seq 600); do
    PORT=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$tmp/$name.out")
    [ -n "$PORT" ] && return 0
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.05
  done
  echo "$me: $name did not start" >&2
  cat "$tmp/$name.err" >&2
  exit 1
}
worker_of() {
  local w=
  for _ in $(seq 100); do
    w=$(cat /proc/"$1"/task/*/children 2>/dev/null | awk '{print $1; exit}')
    [ -n "$w" ] && break
    sleep 0.1
  done
  [ -n "$w" ] || { echo "$me: no worker" >&2; exit 1; }
  echo "$w"
}
