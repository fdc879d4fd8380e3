#!/usr/bin/env bash
# `airetry demo` (make demo) runs to the end: every request answered
# (exit 0), and its trace shows the hedge and the continuation (docs/design.md
# §3.5): the primary's stream breaks after commit, the fallback continues it,
# the caller reads one answer whose last event carries airetry.continued.
# Usage: bash demo.sh /path/to/airetry
set -u
bin=${1:?usage: demo.sh /path/to/airetry}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
timeout 100 "$bin" demo >"$out" 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "demo exited $rc"
grep -q '^summary: 7/7 requests answered' "$out" || fail "not 7/7 answered"
grep -q -- '-> hedge: fallback/claude-sonnet-4-5 races beside it' "$out" || fail "no hedge in the trace"
grep -q -- '-> the stream broke after commit: fallback/claude-haiku-4-5 continues it' "$out" ||
  fail "no continuation in the trace"
grep -qF 'answer: Retries hide a provider that fails before it answers; continuation rescues the answers it breaks halfway through.' "$out" ||
  fail "the continued answer is not the whole answer once"
grep -qF '"airetry": {"continued":[{"target":"fallback/claude-haiku-4-5","at_char":34}]}' "$out" ||
  fail "no airetry.continued marker"
grep -q '= one answer: started by primary/gpt-4.1, finished by fallback/claude-haiku-4-5' "$out" ||
  fail "no one-answer summary"
if [ "$failures" -ne 0 ]; then
  cat "$out" >&2
  echo "demo.sh: $failures failure(s)" >&2
  exit 1
fi
echo "demo.sh: ok"
