# The start of a tests/cli script (sourced after it sets $bin): a temp folder
# removed at exit with every process in $pids stopped, fail() counting into
# $failures, and bounded waits on files the processes write.
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
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

