# The start of a tests/cli script (sourced after it sets $bin): a temp folder
# removed at exit with every process in $pids stopped (SIGTERM, then SIGKILL
# for what still runs 5 s later), fail() counting into $failures, a mock
# started on an ephemeral port, and bounded waits on files the processes
# write.
tmp=$(mktemp -d)
pids=()
cleanup() {
  local p alive
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for _ in $(seq 1 100); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" -eq 0 ] && break
    sleep 0.05
  done
  for p in "${pids[@]}"; do
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# wait_url FILE: the first http://127.0.0.1:PORT printed to FILE (5 s).
wait_url() {
  local u=
  for _ in $(seq 1 100); do
    u=$(grep -o -m 1 'http://127\.0\.0\.1:[0-9]*' "$1" 2>/dev/null | head -n 1)
    [ -n "$u" ] && { echo "$u"; return 0; }
    sleep 0.05
  done
  return 1
}

# wait_lines FILE N: until FILE has N lines starting with '{' (10 s).
wait_lines() {
  for _ in $(seq 1 200); do
    [ "$(grep -c '^{' "$1" 2>/dev/null)" -ge "$2" ] && return 0
    sleep 0.05
  done
  return 1
}

# start_mock: `airetry mock` on an ephemeral 127.0.0.1 port (its output in
# $tmp/mock.out and .err); sets $mock (its URL) and $mock_pid. Exits the
# script when the mock does not start within 5 s.
start_mock() {
  "$bin" mock --listen 127.0.0.1:0 >"$tmp/mock.out" 2>"$tmp/mock.err" &
  mock_pid=$!
  pids+=("$mock_pid")
  mock=$(wait_url "$tmp/mock.out") || {
    echo "FAIL: the mock did not start: $(cat "$tmp/mock.err")" >&2
    exit 1
  }
}
