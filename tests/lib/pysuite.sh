#!/usr/bin/env bash
# Runs one python3 test suite of `airetry serve` (standard library only) and
# makes sure nothing it started outlives it:
#
#   tests/lib/pysuite.sh SUITE.py PATH/TO/airetry [TEST-NAME-SUBSTRING...]
#
# The suite starts `airetry mock`, gateways and raw listeners on 127.0.0.1
# ephemeral ports and stops its own children in a finally block; this
# wrapper sends it SIGTERM if it is interrupted or times out under ctest.
set -eu

suite="${1:-}"
bin="${2:-}"
name="$(basename "$(dirname "$suite")")"
if [ -z "$suite" ] || [ ! -f "$suite" ] || [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "usage: $0 SUITE.py PATH/TO/airetry [TEST-NAME-SUBSTRING...] (got '${suite}' '${bin}')" >&2
  exit 2
fi
shift 2
if ! command -v python3 >/dev/null 2>&1; then
  echo "$name: python3 not found" >&2
  exit 1
fi

pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

python3 "$suite" "$bin" "$@" &
pid=$!
status=0
wait "$pid" || status=$?
pid=""
exit "$status"
