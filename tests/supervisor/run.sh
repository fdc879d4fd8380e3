#!/usr/bin/env bash
# Supervision, reload and log tests of `airetry serve` (DESIGN.md 5):
# a worker crash under load, the restart backoff, validated reloads and
# logs that never block a worker on a stalled stderr.
#
#   tests/supervisor/run.sh PATH/TO/airetry [TEST-NAME-SUBSTRING...]
#
# Everything runs on 127.0.0.1 ephemeral ports: `airetry mock`, gateways in
# front of it. The
# work is done by test_supervisor.py (python3, standard library only); this
# wrapper checks the arguments and makes sure nothing it started outlives it.
set -eu

here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:-}"
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "usage: $0 PATH/TO/airetry [TEST-NAME-SUBSTRING...] (got '${bin}')" >&2
  exit 2
fi
shift
if ! command -v python3 >/dev/null 2>&1; then
  echo "supervisor: python3 not found" >&2
  exit 1
fi

# python3 stops its own children (mock, gateways) in a finally block; it is
# sent SIGTERM here if this script is interrupted or times out under ctest.
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

python3 "$here/test_supervisor.py" "$bin" "$@" &
pid=$!
status=0
wait "$pid" || status=$?
pid=""
exit "$status"
