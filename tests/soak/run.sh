#!/usr/bin/env bash
# Soak under faults (issue 6): `airetry mock` with a random fault mix across
# the targets of six routes, `airetry serve` in front of it, and the driver
# tests/soak/soak.c sending a bounded load through the gateway and checking
# every answer, the gateway's log lines, /metrics, the mock's log, RSS and
# fds (see the comment at the top of soak.c). Everything on 127.0.0.1.
#
#   tests/soak/run.sh PATH/TO/airetry short|long [PATH/TO/soak]
#
# short: ~1,000 requests (ctest soak/short); long: 11,000 (make soak).
# The driver defaults to the `soak` binary beside airetry. The ASan build
# runs the same checks at a lower rate. AIRETRY_SOAK_SEED replays a run
# (the short profile's default seed is fixed, see below).
# Every wait is bounded; the processes are stopped on any exit. The work
# folder is kept (and named) when the soak fails.
set -u

bin="${1:-}"
profile="${2:-short}"
if [ -z "$bin" ] || [ ! -x "$bin" ] || { [ "$profile" != short ] && [ "$profile" != long ]; }; then
  echo "usage: $0 PATH/TO/airetry short|long [PATH/TO/soak]" >&2
  exit 2
fi
driver="${3:-$(dirname "$bin")/soak}"
if [ ! -x "$driver" ]; then
  echo "soak: driver '$driver' not found (build the 'soak' target)" >&2
  exit 2
fi

asan=0
if ldd "$bin" 2>/dev/null | grep -q libasan || [[ "$bin" == *build-asan* ]]; then
  asan=1
fi
# The short profile (ctest soak/short, `make check`) replays a fixed seed:
# under 592213 request soak-592213-209 is aborted 0 ms after it is started,
# often before its connection to the gateway exists (issue 10: the driver
# then expected a log line for a request the gateway never received). The
# long profile draws a new seed per run. AIRETRY_SOAK_SEED overrides both.
if [ "$profile" = short ]; then default_seed=592213; else default_seed=""; fi
seed="${AIRETRY_SOAK_SEED:-${default_seed:-$(( $(date +%s%N) / 1000 % 1000000 ))}}"
if [ "$profile" = short ]; then run_limit=240; else run_limit=900; fi
start_limit=20
rate_args=()
if [ "$asan" = 1 ]; then
  start_limit=60
  # The sanitized gateway (and mock) are several times slower: the same
  # checks, at a lower rate.
  if [ "$profile" = short ]; then rate_args=(--rate 80); else rate_args=(--rate 60); fi
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/airetry-soak.XXXXXX")"
mock_pid=""
gw_pid=""
status=1

# SIGTERM, then SIGKILL after a bounded wait. Prints the exit status.
stop() {
  local pid="$1" i
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "soak: pid $pid did not exit within 10 s of SIGTERM: killed" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null
}

cleanup() {
  trap - EXIT INT TERM
  [ -n "$gw_pid" ] && stop "$gw_pid"
  [ -n "$mock_pid" ] && stop "$mock_pid"
  if [ "$status" = 0 ]; then
    rm -rf "$work"
  else
    echo "soak: work folder kept: $work (seed $seed)" >&2
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'status=1; exit 1' INT TERM

# Waits (bounded) for `listening on http://HOST:PORT` in file $1; prints URL.
wait_listening() {
  local file="$1" pid="$2" i url
  for i in $(seq 1 $((start_limit * 20))); do
    url="$(sed -n 's/^listening on \(http:[^ ]*\).*/\1/p' "$file" 2>/dev/null | head -n 1)"
    if [ -n "$url" ]; then
      echo "$url"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

"$driver" script --profile "$profile" --seed "$seed" --out "$work/mock.yaml" || exit 1

"$bin" mock --listen 127.0.0.1:0 --script "$work/mock.yaml" \
  >"$work/mock.out" 2>"$work/mock.err" &
mock_pid=$!
if ! mock_url="$(wait_listening "$work/mock.out" "$mock_pid")"; then
  echo "soak: the mock did not start within ${start_limit} s" >&2
  tail -n 20 "$work/mock.err" >&2
  exit 1
fi
mock_port="${mock_url##*:}"

"$driver" config --mock-port "$mock_port" --out "$work/gateway.yaml" || exit 1
# ASan keeps freed blocks in a quarantine of up to 256 MB before reusing
# them: RSS growth the memory check would count. The sanitized gateway runs
# with a small quarantine, so after the warm-up its RSS is steady.
gw_asan="${ASAN_OPTIONS:-}"
if [ "$asan" = 1 ]; then gw_asan="${gw_asan:+$gw_asan:}quarantine_size_mb=8"; fi
ASAN_OPTIONS="$gw_asan" "$bin" serve --config "$work/gateway.yaml" --listen 127.0.0.1:0 --workers 2 \
  >"$work/gateway.out" 2>"$work/gateway.log" &
gw_pid=$!
if ! gw_url="$(wait_listening "$work/gateway.out" "$gw_pid")"; then
  echo "soak: the gateway did not start within ${start_limit} s" >&2
  tail -n 20 "$work/gateway.log" >&2
  exit 1
fi

# `serve` is a supervisor; requests are served by its one worker process,
# whose memory and descriptors the driver watches.
worker_pid=""
for _ in $(seq 1 100); do
  worker_pid="$(cat /proc/"$gw_pid"/task/*/children 2>/dev/null | awk '{print $1; exit}')"
  [ -n "$worker_pid" ] && break
  sleep 0.05
done
if [ -z "$worker_pid" ]; then
  echo "soak: no worker process under the gateway (pid $gw_pid)" >&2
  exit 1
fi

rc=0
timeout -k 5 "$run_limit" "$driver" run --profile "$profile" --seed "$seed" \
  --gateway "$gw_url" --mock "$mock_url" --pid "$worker_pid" \
  --log "$work/gateway.log" "${rate_args[@]}" || rc=$?
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  echo "soak: the driver did not finish within ${run_limit} s" >&2
fi

# Both processes exit 0 on SIGTERM (under ASan: no leak, no report).
stop "$gw_pid"
gw_rc=$?
gw_pid=""
stop "$mock_pid"
mock_rc=$?
mock_pid=""
if [ "$gw_rc" != 0 ]; then
  echo "soak: FAIL: the gateway exited $gw_rc on SIGTERM; its last diagnostics:" >&2
  grep -v '^{' "$work/gateway.log" | tail -n 40 >&2
  rc=1
fi
if [ "$mock_rc" != 0 ]; then
  echo "soak: FAIL: the mock exited $mock_rc on SIGTERM" >&2
  tail -n 40 "$work/mock.err" >&2
  rc=1
fi
status="$rc"
exit "$rc"
