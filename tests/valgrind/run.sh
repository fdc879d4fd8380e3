#!/usr/bin/env bash
# The gateway under valgrind's memcheck through a short set of end-to-end
# scenarios: the release binary, which ASan does not see, checked for
# memory errors and leaks (docs/design.md §9).
#
#   tests/valgrind/run.sh PATH/TO/airetry
#
# The e2e suite (tests/e2e) runs with AIRETRY_BIN=tests/valgrind/airetry-vg,
# which starts `airetry serve` under memcheck and `airetry mock` as is, and
# with AIRETRY_E2E_SLOW scaling its waits. Selected tests only (the
# patterns below): streamed and whole answers through both SDKs in both
# dialects, faults with and without a fallback, a failure after commit, the
# Retry-After/scripted path, aborts, bad requests, auth, SIGHUP reloads and
# a SIGTERM with a stream in flight; every file's clean-exit test.
#
# Passes when the tests pass and every gateway's memcheck log ends with
# "ERROR SUMMARY: 0 errors" and no definitely lost bytes. Prints the logs
# otherwise.
set -eu

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${1:-}"
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "usage: $0 PATH/TO/airetry (got '${bin}')" >&2
  exit 2
fi
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"

for tool in valgrind node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "valgrind test: '$tool' not found (scripts/deps.sh installs it)" >&2
    exit 1
  fi
done

# The SDKs, installed as tests/e2e/run.sh does (same lock).
e2e="$root/tests/e2e"
if [ ! -d "$e2e/node_modules" ] || [ "$e2e/package-lock.json" -nt "$e2e/node_modules" ]; then
  (
    cd "$e2e"
    exec 9>"${TMPDIR:-/tmp}/airetry-e2e-npm.lock"
    flock -w 300 9 || { echo "valgrind test: npm install lock busy" >&2; exit 1; }
    if [ ! -d node_modules ] || [ package-lock.json -nt node_modules ]; then
      npm ci --no-audit --no-fund >&2
      touch node_modules
    fi
  )
fi

logdir="$(mktemp -d "${TMPDIR:-/tmp}/airetry-vg.XXXXXX")"
trap 'rm -rf "$logdir"' EXIT

patterns=(
  # tests/e2e/dialects.test.mjs
  '^openai SDK, non-streaming, openai upstream:'
  '^openai SDK, streaming with include_usage, openai upstream$'
  '^openai SDK, streaming, anthropic upstream \(cross-dialect\), usage asked$'
  '^anthropic SDK, non-streaming, anthropic upstream$'
  '^anthropic SDK, streaming \(raw events\), anthropic upstream$'
  '^anthropic SDK, non-streaming, openai upstream \(cross-dialect\)$'
  '^openai SDK receives an Anthropic upstream tool call'
  # tests/e2e/faults.test.mjs
  '^(529|hang): with fallback'
  '^reset: no fallback'
  '^scripted attempts:'
  '^a refusal phrase fails over'
  '^cut=3 after commit \(openai upstream\): the anthropic SDK'
  # tests/e2e/abort.test.mjs
  '^openai SDK: stream\.controller\.abort\(\) mid-stream'
  '^abort while the answer is held before commit'
  '^the gateway keeps serving after aborts$'
  # tests/e2e/http.test.mjs
  '^the SDKs surface a 400 as BadRequestError$'
  '^unknown model: 404'
  '^body over limits\.max_body_bytes: 413 with a JSON error \(OpenAI endpoint\)$'
  '^malformed HTTP on a raw socket'
  '^client auth: no key'
  # tests/e2e/lifecycle.test.mjs
  '^SIGHUP with a broken config'
  '^SIGHUP with a changed config'
  '^a stream in flight across a SIGHUP'
  '^SIGTERM with a slow stream in flight'
  # every file but lifecycle (whose SIGTERM test checks the exit itself)
  '^the gateway and the mock exit 0 on SIGTERM$'
)
args=()
for p in "${patterns[@]}"; do
  args+=("--test-name-pattern=$p")
done

export AIRETRY_BIN="$here/airetry-vg"
export AIRETRY_VG_REAL="$bin"
export AIRETRY_VG_LOGDIR="$logdir"
export AIRETRY_E2E_SLOW="${AIRETRY_E2E_SLOW:-4}"
cd "$root"
start=$(date +%s)
# The tests left out are reported as skipped: not listed here.
set +e
node --test --test-concurrency=1 --test-reporter=spec "${args[@]}" \
  tests/e2e/dialects.test.mjs tests/e2e/faults.test.mjs tests/e2e/abort.test.mjs \
  tests/e2e/http.test.mjs tests/e2e/lifecycle.test.mjs 2>&1 |
  grep -v '# test name does not match pattern'
status=${PIPESTATUS[0]}
set -e
echo "valgrind test: the scenarios took $(( $(date +%s) - start )) s (node exit $status)"

# Every gateway's log: complete (it exited, not killed), no error, nothing
# definitely lost.
shopt -s nullglob
logs=("$logdir"/vg.*.log)
if [ ${#logs[@]} -eq 0 ]; then
  echo "valgrind test: no memcheck log was written (did any gateway start?)" >&2
  exit 1
fi
bad=0
for log in "${logs[@]}"; do
  summary="$(grep -E '== ERROR SUMMARY: ' "$log" | tail -n 1 || true)"
  errors="$(sed -nE 's/.*== ERROR SUMMARY: ([0-9,]+) errors.*/\1/p' <<<"$summary" | tr -d ,)"
  lost="$(sed -nE 's/.*==[ ]+definitely lost: ([0-9,]+) bytes.*/\1/p' "$log" | tail -n 1 | tr -d ,)"
  if [ -z "$errors" ]; then
    echo "valgrind test: $(basename "$log"): no ERROR SUMMARY (killed before exit?)" >&2
    bad=1
  elif [ "$errors" != 0 ] || [ "${lost:-0}" != 0 ]; then
    echo "valgrind test: $(basename "$log"): $errors errors, ${lost:-0} bytes definitely lost" >&2
    bad=1
  else
    echo "valgrind test: $(basename "$log"): 0 errors, ${lost:-0} bytes definitely lost"
  fi
done
if [ "$bad" -ne 0 ]; then
  for log in "${logs[@]}"; do
    echo "==== $(basename "$log")" >&2
    cat "$log" >&2
  done
  exit 1
fi
exit "$status"
