#!/usr/bin/env bash
# End-to-end tests: the official npm SDKs `openai` and `@anthropic-ai/sdk`,
# the Vercel AI SDK (`ai`, `@ai-sdk/*`) and LangChain JS (`@langchain/*`)
# against `airetry serve` in front of `airetry mock`, all on 127.0.0.1.
#
#   tests/e2e/run.sh PATH/TO/airetry
#
# Installs the clients into tests/e2e/node_modules (never committed) with
# `npm ci` when that folder is missing or older than package-lock.json, then
# runs every tests/e2e/*.test.mjs with node's test runner, one file at a time.
# Exits with node's status.
set -eu

here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:-}"
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "usage: $0 PATH/TO/airetry (got '${bin}')" >&2
  exit 2
fi
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "e2e: '$tool' not found: install Node.js 20 or later with npm" \
         "(scripts/deps.sh installs Debian's nodejs and npm when node is missing)" >&2
    exit 1
  fi
done
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 20 ]; then
  echo "e2e: warning: node $(node --version) is older than 20, which the SDKs support" >&2
fi

# One install at a time (two suites may start side by side).
if [ ! -d "$here/node_modules" ] || [ "$here/package-lock.json" -nt "$here/node_modules" ]; then
  (
    cd "$here"
    exec 9>"${TMPDIR:-/tmp}/airetry-e2e-npm.lock"
    flock -w 300 9 || { echo "e2e: npm install lock busy" >&2; exit 1; }
    if [ ! -d node_modules ] || [ package-lock.json -nt node_modules ]; then
      npm ci --no-audit --no-fund >&2
      touch node_modules
    fi
  )
fi

export AIRETRY_BIN="$bin"
cd "$here/../.."
status=0
node --test --test-concurrency=1 tests/e2e/*.test.mjs || status=$?
exit "$status"
